"""Throughput of ``samediff.kernels.fastmath`` in fused Numba kernels vs numpy eager.

* gelu: ``gelu_tanh_f32(x*a + b)`` over 4M float32 in a ``parallel=True`` prange kernel (into a
  preallocated output, and allocating its output like numpy does) vs numpy eager
  ``0.5*y*(1 + tanh(sqrt(2/pi)*(y + 0.044715*y*y*y)))`` vs ``y.copy()``.
* per function: each ``<name>_f32`` applied over 4M float32 in the same kind of kernel, next to
  the closest numpy float32 expression.

Run: ``python benchmarks/bench_fastmath.py [--repeats N]``. Medians in milliseconds.
"""
from __future__ import annotations

import argparse
import math

import numba
import numpy as np
from timing import median_ms  # benchmarks/timing.py (the script's own directory)

from samediff.kernels import fastmath as fm

F32 = np.float32
N = 4 * 1024 * 1024
C = F32(math.sqrt(2.0 / math.pi))


def affine_kernel(fn):
    @numba.njit(parallel=True, fastmath=set(fm.KERNEL_FASTMATH))  # as generated kernels
    def into(x, a, b, out):
        for i in numba.prange(x.size):
            out[i] = fn(x[i] * a + b)

    @numba.njit(parallel=True, fastmath=set(fm.KERNEL_FASTMATH))  # as generated kernels
    def alloc(x, a, b):
        out = np.empty_like(x)
        for i in numba.prange(x.size):
            out[i] = fn(x[i] * a + b)
        return out

    return into, alloc


def numpy_gelu(y):
    return F32(0.5) * y * (F32(1.0) + np.tanh(C * (y + F32(0.044715) * y * y * y)))


NUMPY = {
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "tanh": np.tanh,
    "sigmoid": lambda y: F32(1.0) / (F32(1.0) + np.exp(-y)),
    "softplus": lambda y: np.logaddexp(F32(0.0), y),
    "log_sigmoid": lambda y: -np.logaddexp(F32(0.0), -y),
    "erf": None, "swish": lambda y: y / (F32(1.0) + np.exp(-y)), "gelu_tanh": numpy_gelu,
    "gelu_erf": None,
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    r = args.repeats
    x = np.random.default_rng(0).standard_normal(N).astype(F32)
    a, b = F32(0.7), F32(0.1)
    out = np.empty_like(x)

    into, alloc = affine_kernel(fm.gelu_tanh_f32)
    fused = median_ms(lambda: into(x, a, b, out), r)
    fused_alloc = median_ms(lambda: alloc(x, a, b), r)
    eager = median_ms(lambda: numpy_gelu(x * a + b), max(5, r // 3))
    y = x * a + b
    copy = median_ms(lambda: y.copy(), r)
    err = np.max(np.abs(alloc(x, a, b).astype(np.float64) - numpy_gelu(y.astype(np.float64))))
    print(f"gelu_tanh 4M float32 on {numba.get_num_threads()} threads (median ms):")
    print(f"  fused into preallocated out  {fused:7.3f}   ({eager / fused:5.1f}x numpy, "
          f"{fused / copy:4.2f}x copy)")
    print(f"  fused allocating its output  {fused_alloc:7.3f}   "
          f"({eager / fused_alloc:5.1f}x numpy, {fused_alloc / copy:4.2f}x copy)")
    numba.set_num_threads(1)
    fused_1 = median_ms(lambda: into(x, a, b, out), r)
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    print(f"  fused, 1 thread              {fused_1:7.3f}   ({eager / fused_1:5.1f}x numpy, "
          f"{fused_1 / copy:4.2f}x copy)")
    print(f"  numpy eager                  {eager:7.3f}")
    print(f"  y.copy()                     {copy:7.3f}")
    print(f"  max |fused - float64 gelu|   {err:.2e}")

    print("\nper function, f(x*a + b) over 4M float32 (median ms): fused / numpy float32")
    for name in (n for n in fm.__all__ if n.endswith("_f32")):  # (not row_max: a reduction)
        short = name[:-4]
        into, _ = affine_kernel(getattr(fm, name))
        t = median_ms(lambda: into(x, a, b, out), r)
        ref = NUMPY.get(short)
        tn = median_ms(lambda: ref(x * a + b), max(5, r // 3)) if ref is not None else float("nan")
        print(f"  {short:12s} {t:7.3f}  {tn:8.3f}")


if __name__ == "__main__":
    with np.errstate(all="ignore"):
        main()
