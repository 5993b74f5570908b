"""Loops: nd4py's ``fori_loop`` / ``while_loop`` / ``scan`` inside ``@nd.compile`` against numpy
(a Python loop), ``jax.jit`` of the same ``lax`` loop and PyTorch eager (a Python loop) when
they are installed — all float64, medians of bursts, each contestant in a process of its own,
in turn (``timing.compare``; ``--in-process``: interleaved in one process), ratios from the
same run.

Rows:

* **newton-fori**: 1,000 Newton steps ``x <- (x + a / x) / 2`` on a 64-vector
  (``fori_loop``; the body fuses: the loop runs compiled whole);
* **newton-while**: the same 1,000 steps as a ``while_loop`` on a counter;
* **scan-fused**: a 1,000-step ``scan`` of ``c <- 0.9 c + x``, stacking ``c`` (rows of 64);
* **scan-matmul**: a 200-step RNN ``h <- tanh(h @ W + x)`` (64x64): the body holds a matmul,
  so it does not fuse whole and every step runs the body's plan — the per-step overhead row;
* **grad-while** / **grad-while-ckpt**: reverse mode through a 200-step ``while_loop``
  (save every carry; ``checkpoint=8``) — JAX cannot differentiate ``while_loop``, its row is
  ``jax.grad`` of the equivalent ``fori_loop`` (a scan).

Goal (issue 24): newton and scan-fused <= 1.0x jax.jit. Run ``python
benchmarks/bench_control_flow.py [--json] [--quick] [--busy] [--memory]`` (``--busy``: another
process spins on one core meanwhile; ``--memory``: the peak memory of a 200-step
``while_loop`` gradient over a 2 MB carry, saving every carry and with ``checkpoint=8``).
"""
from __future__ import annotations

import json

import numpy as np

import nd4py as nd

from timing import compare, comparison_parser  # benchmarks/timing.py (the script's directory)

N, STEPS, RNN_STEPS, GRAD_STEPS = 64, 1000, 200, 200
BURST = 5  # calls per sample
RNG = np.random.default_rng(0)
A = np.linspace(1.0, 4.0, N)
XS = RNG.uniform(-1.0, 1.0, (STEPS, N))
RX = RNG.uniform(-1.0, 1.0, (RNN_STEPS, N))
RW = RNG.normal(0.0, 1.0 / np.sqrt(N), (N, N))


def nd_rows() -> dict:
    a, xs, rx, rw = nd.create(A), nd.create(XS), nd.create(RX), nd.create(RW)

    @nd.compile
    def newton_fori(a):
        return nd.fori_loop(0, STEPS, lambda i, x: 0.5 * (x + a / x), a)

    @nd.compile
    def newton_while(a):
        return nd.while_loop(lambda c: c[0] < STEPS, lambda c: (c[0] + 1, 0.5 * (c[1] + a / c[1])),
                             (nd.create(0), a))[1]

    @nd.compile
    def scan_fused(xs):
        return nd.scan(lambda c, x: (c * 0.9 + x, c), nd.create(np.zeros(N)), xs)

    @nd.compile
    def scan_matmul(xs, w):
        return nd.scan(lambda h, x: (nd.tanh(h.mmul(w) + x), None), nd.create(np.zeros((1, N))),
                       xs.reshape(RNN_STEPS, 1, N))[0]

    def grad_while(checkpoint):
        def loss(v):
            out = nd.while_loop(lambda c: c[0] < GRAD_STEPS,
                                lambda c: (c[0] + 1, nd.sin(c[1]) * 0.9 + v * 0.1),
                                (nd.create(0), v), checkpoint=checkpoint)
            return out[1].sum()
        return nd.compile(nd.grad(loss))
    g_all, g_ckpt = grad_while(None), grad_while(8)
    return {"newton-fori": lambda: newton_fori(a), "newton-while": lambda: newton_while(a),
            "scan-fused": lambda: scan_fused(xs), "scan-matmul": lambda: scan_matmul(rx, rw),
            "grad-while": lambda: g_all(a), "grad-while-ckpt": lambda: g_ckpt(a)}


def numpy_rows() -> dict:
    def newton():
        x = A
        for _ in range(STEPS):
            x = 0.5 * (x + A / x)
        return x

    def scan_fused():
        c, ys = np.zeros(N), np.empty((STEPS, N))
        for t in range(STEPS):
            ys[t] = c
            c = c * 0.9 + XS[t]
        return c, ys

    def scan_matmul():
        h = np.zeros((1, N))
        for t in range(RNN_STEPS):
            h = np.tanh(h @ RW + RX[t])
        return h

    def grad_while():  # forward saving every carry, then the reverse pass by hand
        xs = [A]
        for _ in range(GRAD_STEPS):
            xs.append(np.sin(xs[-1]) * 0.9 + A * 0.1)
        g, gv = np.ones(N), np.zeros(N)
        for x in reversed(xs[:-1]):
            gv += g * 0.1
            g = g * np.cos(x) * 0.9
        return g + gv
    return {"newton-fori": newton, "newton-while": newton, "scan-fused": scan_fused,
            "scan-matmul": scan_matmul, "grad-while": grad_while, "grad-while-ckpt": grad_while}


def jax_rows() -> dict | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    lax = jax.lax
    a, xs, rx, rw = (jnp.asarray(v) for v in (A, XS, RX, RW))
    newton = jax.jit(lambda a: lax.fori_loop(0, STEPS, lambda i, x: 0.5 * (x + a / x), a))
    newton_w = jax.jit(lambda a: lax.while_loop(lambda c: c[0] < STEPS,
                                                lambda c: (c[0] + 1, 0.5 * (c[1] + a / c[1])),
                                                (0, a))[1])
    scan_fused = jax.jit(lambda xs: lax.scan(lambda c, x: (c * 0.9 + x, c), jnp.zeros(N), xs))
    scan_matmul = jax.jit(lambda xs, w: lax.scan(lambda h, x: (jnp.tanh(h @ w + x), None),
                                                 jnp.zeros((1, N)), xs.reshape(-1, 1, N))[0])

    def loss(v):
        return lax.fori_loop(0, GRAD_STEPS, lambda i, x: jnp.sin(x) * 0.9 + v * 0.1, v).sum()
    grad = jax.jit(jax.grad(loss))
    ready = jax.block_until_ready
    return {"newton-fori": lambda: ready(newton(a)), "newton-while": lambda: ready(newton_w(a)),
            "scan-fused": lambda: ready(scan_fused(xs)),
            "scan-matmul": lambda: ready(scan_matmul(rx, rw)),
            "grad-while": lambda: ready(grad(a)), "grad-while-ckpt": lambda: ready(grad(a))}


def torch_rows() -> dict | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    a, xs, rx, rw = (torch.tensor(v) for v in (A, XS, RX, RW))

    def newton():
        x = a
        for _ in range(STEPS):
            x = 0.5 * (x + a / x)
        return x

    def scan_fused():
        c, ys = torch.zeros(N, dtype=torch.float64), torch.empty(STEPS, N, dtype=torch.float64)
        for t in range(STEPS):
            ys[t] = c
            c = c * 0.9 + xs[t]
        return c, ys

    def scan_matmul():
        h = torch.zeros(1, N, dtype=torch.float64)
        for t in range(RNN_STEPS):
            h = torch.tanh(h @ rw + rx[t])
        return h

    def grad_while():
        v = a.clone().requires_grad_(True)
        x = v
        for _ in range(GRAD_STEPS):
            x = torch.sin(x) * 0.9 + v * 0.1
        x.sum().backward()
        return v.grad
    return {"newton-fori": newton, "newton-while": newton, "scan-fused": scan_fused,
            "scan-matmul": scan_matmul, "grad-while": grad_while, "grad-while-ckpt": grad_while}


MEMORY_SCRIPT = """
import resource, sys, numpy as np, nd4py as nd
steps, n, checkpoint = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
checkpoint = None if checkpoint == "None" else int(checkpoint)
def loss(v, limit):
    out = nd.while_loop(lambda c: c[0] < limit,
                        lambda c: (c[0] + 1, nd.sin(c[1]) * 0.9 + v * 0.1),
                        (nd.create(0), v), checkpoint=checkpoint)
    return out[1].sum()
g = nd.compile(nd.grad(loss))
g(nd.create(np.linspace(0.1, 1.0, 16)), nd.create(2))  # compiles every kernel, on a tiny problem
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
g(nd.create(np.linspace(0.1, 1.0, n)), nd.create(steps))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before, before)
"""


def memory_rows(steps: int = 200, n: int = 1 << 18) -> dict:
    """Peak memory of a gradient through a ``steps``-step while_loop over an ``n``-element
    float64 carry, per strategy, each in a fresh process: how much its peak RSS grows during
    the call, after a call on a tiny problem compiled everything (Numba's allocations are
    invisible to tracemalloc)."""
    import subprocess
    import sys
    rows = {}
    for checkpoint in ("None", "8"):
        out = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(steps), str(n),
                              checkpoint], capture_output=True, text=True, check=True).stdout
        grown_kb, base_kb = (int(x) for x in out.split())
        rows[f"checkpoint={checkpoint}"] = {"peak_growth_mb": grown_kb / 1024,
                                            "carry_mb": n * 8 / 2 ** 20, "steps": steps}
    return rows


def main() -> None:
    parser = comparison_parser(__doc__)
    parser.add_argument("--memory", action="store_true",
                        help="only the peak memory of the two while_loop gradients")
    args = parser.parse_args()
    if args.memory:
        rows = memory_rows()
        if args.json:
            print(json.dumps(rows, indent=1))
            return
        for name, r in rows.items():
            print(f"while_loop gradient, {r['steps']} steps, carry {r['carry_mb']:.1f} MB, "
                  f"{name}: peak memory grew {r['peak_growth_mb']:.1f} MB during the call")
        return
    result = compare({"nd4py": nd_rows, "numpy": numpy_rows, "jax.jit": jax_rows,
                      "torch": torch_rows}, args, 15, BURST)
    if args.json:
        return
    print(f"per step, scan-matmul: nd4py {result['scan-matmul']['nd4py_ms'] / RNN_STEPS * 1e3:.1f}"
          f" us (the body's plan per step; not fused whole)")


if __name__ == "__main__":
    main()
