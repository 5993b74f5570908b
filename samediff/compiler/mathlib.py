"""Element functions generated kernels call, by dtype: ``<name>_f32`` and ``<name>_f64``.

float32 versions are the vectorizable approximations of ``fastmath`` (documented error bounds,
tested over the whole float32 range); float64 versions use libm, which is exact to an ulp.
"""
from __future__ import annotations

import math

import numpy as np

from ..kernels.fastmath import row_max  # noqa: F401 (the row kernels' shift)
from ..kernels.fastmath import (erf_f32, exp_f32, expm1_f32, gelu_erf_f32, gelu_tanh_f32,  # noqa: F401
                       log1p_f32, log_f32, log_sigmoid_f32, sigmoid_f32, softplus_f32, swish_f32,
                       tanh_f32)
from ..kernels.jit_options import compiled_only

#: not ``inline="always"``: LLVM inlines these one-liners anyway, and Numba's IR inlining
#: cost compile time in every kernel that calls one (``kernels.fastmath``);
#: disk-cached, so a later process's new kernel loads them instead of compiling them
_jit = compiled_only(cache=True)
_HALF = np.float64(0.5)
_SQRT_2_OVER_PI = np.float64(math.sqrt(2.0 / math.pi))
_INV_SQRT2 = np.float64(1.0 / math.sqrt(2.0))


@_jit
def exp_f64(x):
    return math.exp(x)


@_jit
def expm1_f64(x):
    return math.expm1(x)


@_jit
def log_f64(x):
    return math.log(x) if x >= 0 else np.nan


@_jit
def log1p_f64(x):
    return math.log1p(x) if x >= -1 else np.nan


@_jit
def tanh_f64(x):
    return math.tanh(x)


@_jit
def erf_f64(x):
    return math.erf(x)


@_jit
def sigmoid_f64(x):
    e = math.exp(-abs(x))
    return 1.0 / (1.0 + e) if x >= 0 else e / (1.0 + e)


@_jit
def softplus_f64(x):
    return math.log1p(math.exp(-abs(x))) + max(x, 0.0)


@_jit
def log_sigmoid_f64(x):
    return -(math.log1p(math.exp(-abs(x))) + max(-x, 0.0))


# swish and gelu are x * cdf(x) with a cdf that is exactly 0 below -800 / -40 (see
# ops/elementwise.py): clamping there gives -0.0 at -inf (the limit, and the float32 value)
# instead of -inf * 0 = NaN, and changes no finite result. NaN fails the test and stays NaN.
@_jit
def swish_f64(x):
    x = -800.0 if x < -800.0 else x
    return x * sigmoid_f64(x)


@_jit
def gelu_tanh_f64(x):
    x = -40.0 if x < -40.0 else x
    return _HALF * x * (1.0 + math.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))


@_jit
def gelu_erf_f64(x):
    x = -40.0 if x < -40.0 else x
    return _HALF * x * (1.0 + math.erf(x * _INV_SQRT2))


# Row statistics for row-wise kernels. They are separate functions (not inlined) so that
# reassociation — which lets LLVM vectorize the sums — applies to them only, never to the
# fast-math approximations, whose rounding tricks reassociation would break.
_rowjit = compiled_only(fastmath={"reassoc", "contract", "nsz", "arcp"}, cache=True)


# (Indexed loops: Numba vectorizes them; ``for v in row`` iteration it does not — 8x slower.)
@_rowjit
def row_mean_var(row):
    acc = 0.0
    for i in range(row.size):
        acc += row[i]
    mu = acc / row.size
    acc = 0.0
    for i in range(row.size):
        d = row[i] - mu
        acc += d * d
    return mu, acc / row.size


@_jit
def row_norm_f32(mu, var, eps):
    """float32 factors ``(1/p, m, r, c)`` for a row of float64 mean ``mu`` and variance
    ``var``: ``(x * (1/p) - m) * r - c`` is ``(x - mu) / std`` with ``std = sqrt(var + eps)``
    to about an ulp, for two FMAs per element where the kernel contracts (as many operations
    as the plain ``(x - mu) * rstd``, whose float32 mean costs digits).

    * ``p = 2**e >= std`` for std above 1e30 (else 1) makes the scaling exact and keeps every
      factor a normal float32: ``x - mu`` itself overflows when a row spans +-3.4e38, and
      ``1 / std`` is subnormal (inexact) for std above ~1.2e38;
    * ``m`` is ``mu / p`` rounded to float32 and ``c`` the rounding error's share of the
      result: where x is close to the mean ``x / p - m`` is exact (Sterbenz), so rounding the
      mean would otherwise be the only error, and a large one next to a small ``x - mu``.

    The eager op computes the same factors (``ops/nn._normalized_f32``). NaN statistics give
    NaN factors; std = 0 (epsilon 0) an infinite one, as 1 / 0."""
    std = math.sqrt(var + eps)
    p = 1.0
    if std > 1e30:  # (rare, so the common row pays no frexp/ldexp calls)
        p = math.ldexp(1.0, math.frexp(std)[1])  # std = f * 2**e, 0.5 <= f < 1
    m = mu / p
    m32 = np.float32(m)
    r = np.divide(p, std)  # (std = 0: inf, no ZeroDivisionError)
    return np.float32(1.0 / p), m32, np.float32(r), np.float32((m - m32) * r)


@_rowjit
def row_sum(row):
    acc = 0.0
    for i in range(row.size):
        acc += row[i]
    return acc
