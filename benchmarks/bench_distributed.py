"""Samples/second of the digits MLP: local ``fit`` against ``fit_distributed`` on a LocalCluster
of 1 and 2 worker processes, with where each round's time goes (measured by
``fit_distributed`` itself: ``RoundRecord.timings``).

    python benchmarks/bench_distributed.py [--hidden 256] [--frequency 15] [--epochs 3]

Every run first trains one epoch untimed (worker start-up, model load, kernel compiles), then
times ``--epochs`` more. On a 2-core machine two worker processes share the cores with the
client and the scheduler: expect overhead, not speed-up; the point is to show where it goes.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time


sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "examples"))

import nd4py as nd  # noqa: E402
from samediff.datasets import load_digits  # noqa: E402
from samediff.distributed import fit_distributed  # noqa: E402

from mnist_mlp import build, one_hot  # noqa: E402

PHASES = ("encode", "scatter", "wait", "gather", "apply", "worker_setup", "worker_compute",
          "worker_copy", "overhead")


def _model(hidden: int):
    nd.random.set_seed(0)
    return build(64, hidden, 10, 10_000)


def local(train, args) -> float:
    sd = _model(args.hidden)
    sd.fit(train, epochs=1, batch_size=args.batch_size, verbose=0)
    t0 = time.perf_counter()
    sd.fit(train, epochs=args.epochs, batch_size=args.batch_size, verbose=0)
    return args.epochs * len(train[0]) / (time.perf_counter() - t0)


def distributed(train, args, workers: int, mode: str) -> tuple[float, dict, int]:
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        sd = _model(args.hidden)
        kw = dict(batch_size=args.batch_size, averaging_frequency=args.frequency, mode=mode,
                  partitions=workers, verbose=0)
        fit_distributed(sd, train, client, epochs=1, **kw)
        t0 = time.perf_counter()
        history = fit_distributed(sd, train, client, epochs=args.epochs, **kw)
        seconds = time.perf_counter() - t0
        return args.epochs * len(train[0]) / seconds, history.timings(), len(history.rounds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--frequency", type=int, default=15)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--modes", default="average,gradients")
    args = parser.parse_args(argv)
    x, y, _, _ = load_digits(test_fraction=0.2, seed=0)
    train = (x, one_hot(y, 10))
    print(f"digits MLP 64-{args.hidden}-10, {len(x)} examples, batch {args.batch_size}, "
          f"{args.epochs} timed epochs, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"local fit: {local(train, args):8.0f} samples/s")
    for mode in args.modes.split(","):
        for workers in (1, 2):
            rate, timings, rounds = distributed(train, args, workers, mode)
            per_round = {k: 1e3 * timings.get(k, 0.0) / rounds for k in PHASES}
            print(f"{mode:9s} {workers} worker(s): {rate:8.0f} samples/s, {rounds} rounds; ms per "
                  f"round: " + ", ".join(f"{k} {v:.1f}" for k, v in per_round.items()))


if __name__ == "__main__":
    main()
