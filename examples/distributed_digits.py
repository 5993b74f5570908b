"""The digits MLP of ``mnist_mlp.py`` trained data-parallel on Dask, then evaluated blockwise.

Runs on this machine by starting a ``LocalCluster`` (worker processes); ``--scheduler`` points
it at a real cluster instead (``dask scheduler`` on one host, ``dask worker tcp://host:8786``
on each of the others, every worker with nd4py installed: ``pip install 'nd4py[distributed]'``).
Nothing here opens ports or talks to the network itself: Dask does.

    python examples/distributed_digits.py                          # 2 local worker processes
    python examples/distributed_digits.py --workers 4 --mode gradients
    python examples/distributed_digits.py --scheduler tcp://10.0.0.5:8786

Parameter averaging (DL4J's scheme) is the default: each round every partition runs
``--frequency`` steps from the same parameters and updater state, then both are averaged. The
schedule spans the steps *one partition* takes, and the peak learning rate is scaled by the
number of partitions (the linear scaling rule), so the run reaches the single-machine accuracy
in the same number of epochs.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import nd4py as nd
from samediff.datasets import load_digits
from samediff.distributed import fit_distributed, predict_blocks
from samediff.evaluation import Evaluation
from samediff.training import Adam, CosineSchedule, TrainingConfig

from mnist_mlp import build, one_hot


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. "
                        "tcp://host:8786 (default: start a LocalCluster here)")
    parser.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--frequency", type=int, default=15, help="local steps per round")
    parser.add_argument("--mode", choices=["average", "gradients"], default="average")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--checkpoint", default=None, help="checkpoint path or fsspec URL "
                        "(every 10 rounds; --resume continues from it)")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--verbose", type=int, default=None)
    args = parser.parse_args(argv)
    from distributed import Client, LocalCluster

    if args.scheduler:
        client, cluster = Client(args.scheduler), None
    else:
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    try:
        return _train(client, args)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _train(client, args) -> float:
    partitions = len(client.scheduler_info()["workers"])
    x_train, y_train, x_test, y_test = load_digits(test_fraction=0.2, seed=0)
    train, test = (x_train, one_hot(y_train, 10)), (x_test, one_hot(y_test, 10))
    steps = args.epochs * -(-len(x_train) // partitions // args.batch_size)
    nd.random.set_seed(0)
    sd = build(x_train.shape[1], args.hidden, 10, steps)
    peak = 3e-3 * (partitions if args.mode == "average" else 1)
    sd.set_training_config(TrainingConfig(
        updater=Adam(CosineSchedule(peak, total_steps=steps, warmup_steps=steps // 20)),
        l2=1e-4, feature_mapping=["input"], label_mapping=["labels"]))
    print(f"{client}: {partitions} partitions of ~{len(x_train) // partitions} examples, "
          f"mode {args.mode}")
    t0 = time.perf_counter()
    history = fit_distributed(sd, train, client, epochs=args.epochs, batch_size=args.batch_size,
                              averaging_frequency=args.frequency, mode=args.mode,
                              partitions=partitions, validation=test,
                              checkpoint_every=10 if args.checkpoint else None,
                              checkpoint_path=args.checkpoint, resume=args.resume,
                              verbose=args.verbose, seed=0)
    seconds = time.perf_counter() - t0
    rate = np.median(history.samples_per_second) if history.rounds else float("nan")
    print(f"trained {len(history.epochs)} epochs in {len(history.rounds)} rounds, "
          f"{seconds:.1f} s (median {rate:.0f} samples/s per round); retries per round: "
          f"{sum(history.retries)} in all")
    print("where the time went (s): " + ", ".join(f"{k} {v:.2f}"
                                                  for k, v in history.timings().items()))
    import dask.array as da
    probs = predict_blocks(sd, da.from_array(x_test, chunks=100), "softmax").compute()
    accuracy = float(np.mean(probs.argmax(1) == y_test))
    check = sd.evaluate(test, "softmax", Evaluation()).accuracy()
    print(f"test accuracy {accuracy:.4f} (blockwise on the cluster); local evaluate {check:.4f}")
    return accuracy


if __name__ == "__main__":
    main()
