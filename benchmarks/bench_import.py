"""Import time: ``import numpy``, ``import nd4py`` and (when installed) ``import jax`` /
``import torch``, each in a fresh interpreter.

Every sample is a new ``python -c "import X"`` process timed from inside (``perf_counter``
around the import alone, so interpreter start-up is not counted); the libraries are
interleaved within each round, so a busy moment on the machine slows all of them alike.
Prints the median seconds over ``--repeats`` rounds and the ratio to ``import numpy``.
The compiled kernels (Numba, the private BLAS) load on the first op that needs them, not at
import: ``import nd4py`` should stay well below ``import jax``.

Bytecode is cached as an installed package's would be: the runs write and read ``.pyc`` files
under a temporary ``PYTHONPYCACHEPREFIX`` (never in the source tree), even where
``PYTHONDONTWRITEBYTECODE`` is set; the warm-up run of each library fills it. ``--no-pyc``
measures with no bytecode cache (every module compiled from source, every run).

``--path DIR`` times the nd4py of the tree DIR instead of this one; given twice or more, one
row per tree, interleaved (to compare checkouts in one run).
Run: ``python benchmarks/bench_import.py [--repeats N] [--path DIR ...] [--no-pyc] [--json]``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile

_PROBE = ("import time; t0 = time.perf_counter(); import {mod}; "
          "print(time.perf_counter() - t0)")


def _available(mod: str) -> bool:
    return importlib.util.find_spec(mod) is not None


def import_seconds(mod: str, env: dict) -> float:
    """Seconds ``import mod`` takes in a fresh interpreter (start-up excluded), run in the
    tree that ``env`` puts first on the path (``-c`` puts the working directory before it)."""
    out = subprocess.run([sys.executable, "-c", _PROBE.format(mod=mod)], env=env, check=True,
                         capture_output=True, text=True, cwd=env["PYTHONPATH"].split(os.pathsep)[0]
                         ).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="rounds (median reported)")
    parser.add_argument("--path", action="append", help="a tree put first on PYTHONPATH for "
                        "the nd4py row (repeat it to compare trees in one run)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--no-pyc", action="store_true", help="no bytecode cache")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_import_pyc_") as pyc:
        run(args, pyc)


def run(args: argparse.Namespace, pyc: str) -> None:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    roots = args.path or [here]
    base = dict(os.environ)
    if args.no_pyc:
        base["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        base.pop("PYTHONDONTWRITEBYTECODE", None)
        base["PYTHONPYCACHEPREFIX"] = pyc

    def env_for(root: str) -> dict:
        return dict(base, PYTHONPATH=os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH", "")) if p))

    # (label, module, environment): one nd4py row per tree, others run with the first's path
    rows = [("numpy", "numpy", env_for(roots[0]))]
    rows += [("nd4py" if len(roots) == 1 else f"nd4py {root}", "nd4py", env_for(root))
             for root in roots]
    rows += [(m, m, env_for(roots[0])) for m in ("jax", "torch") if _available(m)]
    samples: dict[str, list[float]] = {label: [] for label, _, _ in rows}
    for _, mod, env in rows:  # a warm-up each: it pays for cold disk caches and .pyc writes
        import_seconds(mod, env)
    for _ in range(args.repeats):
        for label, mod, env in rows:
            samples[label].append(import_seconds(mod, env))
    med = {label: statistics.median(s) for label, s in samples.items()}
    if args.json:
        print(json.dumps({label: round(v, 4) for label, v in med.items()}))
        return
    cache = "no bytecode cache" if args.no_pyc else "bytecode cached"
    print(f"import time, median of {args.repeats} fresh processes each, {cache}")
    for label in med:
        print(f"  import {label:<6} {med[label]:7.3f} s  {med[label] / med['numpy']:5.1f}x numpy")
    for m in ("jax", "torch"):
        if m not in med:
            print(f"  import {m:<6} (not installed)")


if __name__ == "__main__":
    main()
