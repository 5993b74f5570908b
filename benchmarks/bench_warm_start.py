"""Warm start: a new process reaching the first result of a plan compiled by an earlier one.

Per row, nd4py runs in fresh processes whose kernel cache (``ND4PY_CACHE_DIR`` and
``NUMBA_CACHE_DIR`` in one prepared directory) a first process filled, and ``jax.jit`` runs in
fresh processes with its persistent compilation cache enabled (``jax_compilation_cache_dir``,
``jax_persistent_cache_min_compile_time_secs=0``, ``jax_persistent_cache_min_entry_size_bytes
=0``), likewise filled by a first process. The two alternate, process by process, so a busy
moment on the machine slows both alike:

* **W1** ``gelu(x * a + b)`` on 4M float32 (``@nd.compile`` / ``jax.jit``);
* **W3** the 784-256-10 MLP training step (batch 128, SGD) through ``fit`` (``bench_training``)
  / a jitted ``value_and_grad`` step;
* **W9** a pre-LN transformer block's training step (batch 8, seq 128, d 256, 4 heads, GELU
  MLP x4, MSE, SGD) through ``fit`` (``workloads.py``) / the same block in ``jax.numpy``.

*to first result*: wall seconds from launching the process (interpreter start-up included) to
the first result on the host (the first ``fit`` iteration's end; a jax value converted to
numpy); *import*: ``import nd4py`` / ``import jax, jax.numpy`` alone; *second call*: the next
call or step; *cold*: the process that filled the cache (one sample). Medians over
``--repeats`` processes each, and the median of the per-round nd4py/jax ratios (goal: <= 1). Bytecode is cached as an installed package's would
be (as ``bench_import.py``: a temporary ``PYTHONPYCACHEPREFIX``).

jax runs under ``--jax-python`` (default: this interpreter; rows are skipped when it has no
jax). ``--path DIR`` (repeatable) times the nd4py of tree DIR, one row per tree, interleaved.
Run: ``python benchmarks/bench_warm_start.py [--rows W1,W3,W9] [--repeats N]
[--jax-python /tmp/peervenv/bin/python] [--path DIR ...] [--json]``.
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
ROOT = os.path.dirname(HERE)


# -- children: one per process, each prints one JSON line ------------------------------------

def _nd4py_child(row: str) -> dict:
    t0 = time.perf_counter()
    import nd4py as nd
    import numpy as np
    imported = time.perf_counter()
    sys.path.insert(0, HERE)
    stamps: list[float] = []
    if row == "W1":
        x = nd.create(np.random.default_rng(0).random(1 << 22, dtype=np.float32))
        a, b = nd.create(np.float32(1.5)), nd.create(np.float32(0.25))

        @nd.compile
        def w1(x, a, b):
            return nd.nn.gelu(x * a + b)
        for _ in range(2):
            w1(x, a, b).numpy()
            stamps.append(time.time())
    else:
        from samediff.training.listeners import LambdaListener
        rng = np.random.default_rng(0)
        if row == "W3":
            from bench_training import B, C, D, build, init
            sd, batch = build(init(rng)), B
            data = (rng.random((2 * B, D), dtype=np.float32),
                    np.eye(C, dtype=np.float32)[rng.integers(0, C, 2 * B)])
        else:
            from workloads import W9_BATCH, w9_data, w9_params, w9_samediff
            sd, batch = w9_samediff(w9_params(rng)), W9_BATCH
            data = w9_data(rng, 2 * W9_BATCH)
        sd.fit(data, epochs=1, batch_size=batch, shuffle=False, verbose=0, listeners=[
            LambdaListener(on_iteration_end=lambda t, i, loss: stamps.append(time.time()))])
    return {"import_s": imported - t0, "first_wall": stamps[0], "second_s": stamps[1] - stamps[0]}


def _jax_w9_loss(jnp, jax):
    from workloads import EPS, W9_HEADS, W9_SEQ

    def ln(x, g, b):
        mu = x.mean(-1, keepdims=True)
        c = x - mu
        return c * jax.lax.rsqrt((c * c).mean(-1, keepdims=True) + EPS) * g + b

    def loss(p, x, y):
        d = x.shape[-1]
        dh = d // W9_HEADS
        h0 = x.reshape(-1, d)
        h = ln(h0, p["b0_ln1_g"], p["b0_ln1_b"])

        def split(t):
            return t.reshape(-1, W9_SEQ, W9_HEADS, dh).transpose(0, 2, 1, 3)
        q, k, v = (split(h @ p["b0_" + w]) for w in ("wq", "wk", "wv"))
        att = jax.nn.softmax(q @ k.swapaxes(-1, -2) * (1.0 / dh ** 0.5), axis=-1)
        h0 = h0 + (att @ v).transpose(0, 2, 1, 3).reshape(-1, d) @ p["b0_wo"]
        h = ln(h0, p["b0_ln2_g"], p["b0_ln2_b"])
        out = h0 + jax.nn.gelu(h @ p["b0_w1"] + p["b0_c1"]) @ p["b0_w2"] + p["b0_c2"]
        diff = out - y.reshape(-1, d)
        return (diff * diff).mean()
    return loss


def _jax_child(row: str, cache: str) -> dict:
    t0 = time.perf_counter()
    import jax
    import jax.numpy as jnp
    import numpy as np
    imported = time.perf_counter()
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    sys.path.insert(0, HERE)
    rng = np.random.default_rng(0)
    stamps: list[float] = []
    if row == "W1":
        x = jnp.asarray(rng.random(1 << 22, dtype=np.float32))
        w1 = jax.jit(lambda x, a, b: jax.nn.gelu(x * a + b))
        for _ in range(2):
            np.asarray(w1(x, np.float32(1.5), np.float32(0.25)))
            stamps.append(time.time())
        return {"import_s": imported - t0, "first_wall": stamps[0],
                "second_s": stamps[1] - stamps[0]}
    if row == "W3":  # the shapes of bench_training (not imported: it imports nd4py)
        b, d, hid, c, lr = 128, 784, 256, 10, 0.01
        p = {"w1": rng.standard_normal((d, hid), dtype=np.float32) * np.float32(0.05),
             "b1": np.zeros(hid, np.float32),
             "w2": rng.standard_normal((hid, c), dtype=np.float32) * np.float32(0.09),
             "b2": np.zeros(c, np.float32)}

        def loss(p, x, y):
            z = jax.nn.relu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
            return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(z), 1))
        batches = [(rng.random((b, d), dtype=np.float32),
                    np.eye(c, dtype=np.float32)[rng.integers(0, c, b)]) for _ in range(2)]
    else:
        from workloads import W9_BATCH, W9_LR, w9_data, w9_params
        lr, p, loss = W9_LR, w9_params(rng), _jax_w9_loss(jnp, jax)
        x, y = w9_data(rng, 2 * W9_BATCH)
        batches = [(x[k:k + W9_BATCH], y[k:k + W9_BATCH]) for k in (0, W9_BATCH)]

    @jax.jit
    def step(p, x, y):
        value, grads = jax.value_and_grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda w, g: w - lr * g, p, grads), value
    for x, y in batches:
        p, value = step(p, x, y)
        float(value)
        stamps.append(time.time())
    return {"import_s": imported - t0, "first_wall": stamps[0], "second_s": stamps[1] - stamps[0]}


# -- the parent -----------------------------------------------------------------------------

def _has_jax(python: str) -> bool:
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('jax') is None)"
    try:
        return subprocess.run([python, "-c", probe], capture_output=True).returncode == 0
    except OSError:
        return False


def _run(python: str, args: list[str], env: dict) -> dict:
    """One fresh process; its result plus ``wall_s``, launch to first result."""
    launch = time.time()
    out = subprocess.run([python, os.path.abspath(__file__), "--child", *args], env=env,
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"child {args} failed:\n{out.stderr[-3000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["wall_s"] = res.pop("first_wall") - launch
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="W1,W3,W9")
    parser.add_argument("--repeats", type=int, default=7, help="fresh processes per library")
    parser.add_argument("--jax-python", default=sys.executable,
                        help="the interpreter jax rows run under (skipped if it has no jax)")
    parser.add_argument("--path", action="append", help="a tree whose nd4py is timed "
                        "(repeat to compare trees in one run; default: this one)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        lib, row, *rest = args.child
        res = _nd4py_child(row) if lib == "nd4py" else _jax_child(row, *rest)
        print(json.dumps(res))
        return
    with tempfile.TemporaryDirectory(prefix="bench_warm_") as tmp:
        results = run(args, tmp)
    if args.json:
        print(json.dumps(results))


def _tree_env(base: dict, tree: str) -> dict:
    return dict(base, PYTHONPATH=os.pathsep.join(p for p in (tree, os.environ.get("PYTHONPATH"))
                                                 if p))


def run(args: argparse.Namespace, tmp: str) -> dict:
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pyc")
    trees = args.path or [ROOT]
    jax_ok = _has_jax(args.jax_python)
    for tree in trees:  # fill the bytecode cache first: "cold" means a cold kernel cache only
        subprocess.run([sys.executable, "-c", "import nd4py, samediff.compiler.plan, "
                        "samediff.kernels.matmul, samediff.training"], env=_tree_env(base, tree),
                       check=True, capture_output=True)
    if jax_ok:
        subprocess.run([args.jax_python, "-c", "import jax, jax.numpy"], env=base, check=True,
                       capture_output=True)
    print(f"warm start: fresh processes, kernel/compilation caches filled by a first process; "
          f"medians of {args.repeats}")
    print(f"{'row':4} {'library':22} {'to first result':>16} {'import':>8} {'second call':>12} "
          f"{'cold':>8}  paired ratio (median of per-round ratios)")
    results: dict = {}
    for row in args.rows.split(","):
        libs = []  # (label, python, child args, env)
        for k, tree in enumerate(trees):
            cache = os.path.join(tmp, f"{row}-nd4py-{k}")
            env = dict(_tree_env(base, tree), ND4PY_CACHE_DIR=cache,
                       NUMBA_CACHE_DIR=os.path.join(cache, "numba"))
            label = "nd4py" if len(trees) == 1 else f"nd4py {os.path.basename(tree.rstrip('/'))}"
            libs.append((label, sys.executable, ["nd4py", row], env))
        if jax_ok:
            libs.append(("jax.jit (cache)", args.jax_python,
                         ["jax", row, os.path.join(tmp, f"{row}-jax")], dict(base)))
        cold = {label: _run(py, a, env)["wall_s"] for label, py, a, env in libs}  # fills caches
        samples: dict[str, list[dict]] = {label: [] for label, *_ in libs}
        for _ in range(args.repeats):
            for label, py, a, env in libs:
                samples[label].append(_run(py, a, env))
        med = {label: {key: statistics.median(s[key] for s in runs)
                       for key in ("wall_s", "import_s", "second_s")}
               for label, runs in samples.items()}

        def paired(label: str, ref: str) -> float:
            """Median over rounds of the ratio of two libraries' walls in the same round."""
            return statistics.median(a["wall_s"] / b["wall_s"]
                                     for a, b in zip(samples[label], samples[ref]))
        first = libs[0][0]
        for label, m in med.items():
            ratios = {}
            if jax_ok and label != "jax.jit (cache)":
                ratios["jax"] = paired(label, "jax.jit (cache)")
            if len(trees) > 1 and label.startswith("nd4py") and label != first:
                ratios[first] = paired(label, first)
            print(f"{row:4} {label:22} {m['wall_s']:14.3f} s {m['import_s']:6.3f} s "
                  f"{m['second_s'] * 1e3:9.1f} ms {cold[label]:6.2f} s  "
                  + ", ".join(f"{v:.2f}x {k}" for k, v in ratios.items()))
            results[f"{row}/{label}"] = {**m, "cold_s": cold[label],
                                         **{f"ratio_vs_{k}": v for k, v in ratios.items()}}
        if not jax_ok:
            print(f"{row:4} {'jax.jit (cache)':22} (jax not installed under {args.jax_python})")
    return results


if __name__ == "__main__":
    main()
