"""Shared timing helpers of the benchmark scripts: medians of repeated runs after a warm-up."""
from __future__ import annotations

import contextlib
import statistics
import time
from typing import Callable


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``fn()`` in milliseconds (one warm-up call first)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def fit_iteration_ms(sd, data: tuple, batch_size: int, repeats: int) -> float:
    """Median wall time of one ``sd.fit`` iteration in milliseconds: whole epochs over
    ``data`` (the first one, compiling, not counted), divided by their batch count."""
    n_batches = len(data[0]) // batch_size
    return median_ms(lambda: sd.fit(data, epochs=1, batch_size=batch_size, verbose=0),
                     repeats) / n_batches


def _spin(stop) -> None:
    x = 0
    while not stop.is_set():
        x += 1


@contextlib.contextmanager
def busy_core(busy: bool):
    """While the block runs, another process spins on one core (when ``busy``)."""
    import multiprocessing
    stop, spinner = multiprocessing.Event(), None
    if busy:
        spinner = multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
        spinner.start()
    try:
        yield
    finally:
        stop.set()
        if spinner is not None:
            spinner.join()


def _ratios(samples: dict, rows: list) -> dict:
    """``{row: {"<c>_ms": median, "vs_<c>": median of the per-round ratios}}`` of per-round
    samples ``{contestant: {row: [ms per round]}}`` (the first contestant's ratios)."""
    names = list(samples)
    first, result = names[0], {}
    for row in rows:
        ours = samples[first][row]
        entry = {f"{first}_ms": statistics.median(ours)}
        for c in names[1:]:
            theirs = samples[c][row]
            entry[f"{c}_ms"] = statistics.median(theirs)
            entry[f"vs_{c}"] = statistics.median([o / t for o, t in zip(ours, theirs)])
        result[row] = entry
    return result


#: warm-up of a contestant's fresh process, per row: calls until this many seconds have
#: passed (at least one call, at most ``WARMUP_CALLS``). One call was not enough: nd4py's
#: first bursts still loaded kernels on its compile thread and calibrated its helper (W8's
#: step 8.6 ms in a first burst, 4.4-4.6 after), and a median of three bursts kept it
WARMUP_S = 0.3
WARMUP_CALLS = 50


def child_samples(rows: dict, bursts: int, burst: int) -> dict:
    """In a contestant's own process: ``{row: [median of each burst of `burst` calls]}``,
    ``bursts`` samples per row, rows taken in turn, after each row's warm-up (``WARMUP_S``:
    every contestant alike; cold and first-call times are ``bench_first_call``'s and
    ``bench_warm_start``'s)."""
    for fn in rows.values():
        start = time.perf_counter()
        for _ in range(WARMUP_CALLS):
            fn()
            if time.perf_counter() - start > WARMUP_S:
                break
    samples: dict = {r: [] for r in rows}
    for _ in range(bursts):
        for row, fn in rows.items():
            times = []
            for _ in range(burst):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
            samples[row].append(statistics.median(times))
    return samples


def alternating_processes(command: list, names: list, rows: list | None, rounds: int,
                          busy: bool = False) -> dict:
    """``interleaved``'s result, each contestant timed in a process of its own: per round, one
    process per contestant in rotating order runs ``command + ["--child", name]``, which
    prints ``child_samples``' JSON on its last line (or ``{"missing": reason}`` when the
    contestant's library is not installed: it is dropped); a round's time is that process's
    median per row (``rows`` None: the first child's rows). No contestant's thread pool
    (spinning after its calls) then runs next to another's -- in one process ONNX Runtime's
    spinning intra-op threads and nd4py's helper slowed each other (``bench_onnx``)."""
    import json
    import subprocess
    names = list(names)
    samples: dict = {c: {} for c in names}
    with busy_core(busy):
        for k in range(rounds):
            for c in names[k % len(names):] + names[:k % len(names)]:
                done = subprocess.run(command + ["--child", c], capture_output=True, text=True)
                if done.returncode:
                    raise RuntimeError(f"{c}'s process failed:\n{done.stderr[-3000:]}")
                got = json.loads(done.stdout.strip().splitlines()[-1])
                if "missing" in got:
                    samples.pop(c)
                    continue
                rows = list(got) if rows is None else rows
                for r in rows:
                    samples[c].setdefault(r, []).append(statistics.median(got[r]))
            names = [c for c in names if c in samples]
    return _ratios(samples, rows or [])


def interleaved(contestants: dict, rounds: int, burst: int = 5, busy: bool = False) -> dict:
    """Ratios of the first contestant's times to each other's, measured in the same run.

    ``contestants`` maps a name to ``{row: fn}`` (every contestant has the first one's rows).
    After one warm-up call of every function (compiles), each round runs, per row, a burst of
    ``burst`` calls of every contestant in rotating order; a sample is the burst's median (its
    first call may pay for the previous contestant's threads still spinning: XLA's and torch's
    pools do). ``busy``: another process spins on one core meanwhile. Returns ``{row: {"<c>_ms":
    median, "vs_<c>": median of the per-round ratios}}``."""
    names = list(contestants)
    first = names[0]
    with busy_core(busy):
        for rows in contestants.values():
            for fn in rows.values():
                fn()
        samples: dict = {c: {r: [] for r in contestants[first]} for c in names}
        for k in range(rounds):
            for row in contestants[first]:
                for c in names[k % len(names):] + names[:k % len(names)]:
                    fn, times = contestants[c][row], []
                    for _ in range(burst):
                        t0 = time.perf_counter()
                        fn()
                        times.append((time.perf_counter() - t0) * 1e3)
                    samples[c][row].append(statistics.median(times))
    return _ratios(samples, list(contestants[first]))


def print_ratios(result: dict, names: list[str], busy: bool = False, width: int = 16) -> None:
    """The table of ``interleaved``'s result: times per contestant, then the ratios."""
    print(f"{'row':<{width}}" + "".join(f"{c + ' ms':>13}" for c in names)
          + "".join(f"{'/' + c:>11}" for c in names[1:]) + ("   (busy core)" if busy else ""))
    for row, e in result.items():
        print(f"{row:<{width}}" + "".join(f"{e[c + '_ms']:>13.3f}" for c in names)
              + "".join(f"{e['vs_' + c]:>10.2f}x" for c in names[1:]))


def comparison_parser(doc: str, processes: bool = True):
    """The usual options of a ``compare`` script: ``--json``, ``--quick``, ``--busy`` and,
    when it times in processes of their own (``processes``), ``--in-process`` (add a
    script's own, then ``parse_args()``)."""
    import argparse
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--busy", action="store_true", help="spin another process on a core")
    if not processes:
        return parser
    parser.add_argument("--in-process", action="store_true",
                        help="time every contestant in this process, interleaved burst by "
                        "burst (the default: each in a process of its own, in turn)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--bursts", type=int, default=3, help=argparse.SUPPRESS)
    return parser


def compare(makers: dict, args, rounds: int, burst: int = 5) -> dict:
    """The usual comparison run: ``makers`` maps a contestant's name to a function building
    its ``{row: fn}`` (None: not installed, skipped); ``args`` has ``json``, ``quick``
    (3 rounds instead of ``rounds``), ``busy`` and ``in_process``. By default each round runs
    every contestant in a process of its own, in rotating order (``alternating_processes``:
    the script itself with ``--child NAME``, which builds that contestant's rows and times
    ``--bursts`` bursts of ``burst`` calls per row); with ``--in-process`` all of them run
    here, interleaved burst by burst (``interleaved``: faster, but one library's spinning
    thread pool then slows the next one's calls). Prints the table (or JSON); returns the
    result; a child prints its samples and exits."""
    import json
    import sys
    if args.child:  # one contestant's own process
        rows = makers[args.child]()
        print(json.dumps({"missing": "not installed"} if rows is None
                         else child_samples(rows, args.bursts, burst)))
        raise SystemExit(0)
    n = 3 if args.quick else rounds
    if args.in_process:
        contestants = {}
        for name, make in makers.items():
            rows = make()
            if rows is not None:
                contestants[name] = rows
        result = interleaved(contestants, n, burst, args.busy)
        names = list(contestants)
    else:
        command = [sys.executable, sys.argv[0], "--bursts", str(args.bursts)]
        result = alternating_processes(command, list(makers), None, n, args.busy)
        names = [c for c in makers if any(f"{c}_ms" in e for e in result.values())]
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print_ratios(result, names, args.busy)
    return result
