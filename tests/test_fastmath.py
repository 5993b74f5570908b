"""Accuracy of the float32 kernel math in ``samediff.kernels.fastmath``.

Each function runs (through one vectorized Numba loop per function) over a grid spanning the
whole float32 range -- 2**20 evenly spaced bit patterns of each sign, so every binade from the
subnormals to the largest finite value is sampled, plus specials -- and over a dense grid of its
interesting range.  Results are compared with numpy/scipy float64 references in units of the
float32 ulp of the reference (2**-149 for the subnormal range, so it is defined down to 0).
The bounds asserted here are the ones documented in the module docstring.
"""
from __future__ import annotations

import functools
import math
import re

import numba
import numpy as np
import pytest

from samediff.kernels import fastmath as fm

try:
    import scipy.special as sps
except ImportError:  # scipy is optional: math.erf/erfc element by element instead
    sps = None

F32 = np.float32
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _erf(x):
    return sps.erf(x) if sps is not None else np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)


def _erfc(x):
    return sps.erfc(x) if sps is not None else np.frompyfunc(math.erfc, 1, 1)(x).astype(np.float64)


def _expit(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _gelu_z(x):
    return 2.0 * SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)


# name: (float64 reference, max ulp over the whole range, interesting range, max ulp there)
CASES = {
    "exp": (np.exp, 1.1, (-20, 20), 1.1),
    "expm1": (np.expm1, 1.8, (-2, 2), 1.8),
    "log": (np.log, 0.9, (0.01, 10), 0.9),
    "log1p": (np.log1p, 0.9, (-0.99, 10), 0.9),
    "tanh": (np.tanh, 2.7, (-10, 10), 2.7),
    "sigmoid": (_expit, 2.5, (-20, 20), 2.5),
    "softplus": (lambda x: np.logaddexp(0.0, x), 1.8, (-20, 20), 1.8),
    "log_sigmoid": (lambda x: -np.logaddexp(0.0, -x), 1.8, (-20, 20), 1.8),
    "erf": (_erf, 1.4, (-4, 4), 1.4),
    "swish": (lambda x: x * _expit(x), 3.5, (-20, 20), 3.5),
    "gelu_tanh": (lambda x: x * _expit(_gelu_z(x)), None, (-6, 6), None),
    "gelu_erf": (lambda x: 0.5 * x * _erfc(-x / math.sqrt(2.0)), 4.8, (-6, 6), 4.8),
}
# gelu_tanh: float32 rounding of the cubic z = 2*sqrt(2/pi)*(x + 0.044715x^3) moves exp(-|z|) by
# ~|z| ulp, so for x < 0 (where the result is ~ x*exp(z)) the bound grows with |z|.
GELU_TANH_POS_BOUND = 1.9
GELU_TANH_Z_SLOPE = 2.6

SPECIALS = {
    "exp": [(-np.inf, 0.0), (np.inf, np.inf), (0.0, 1.0), (89.0, np.inf), (-104.0, 0.0)],
    "expm1": [(-np.inf, -1.0), (np.inf, np.inf), (0.0, 0.0), (89.0, np.inf), (-30.0, -1.0)],
    "log": [(0.0, -np.inf), (-0.0, -np.inf), (-1.0, np.nan), (-np.inf, np.nan), (np.inf, np.inf),
            (1.0, 0.0), (2.0 ** -149, -149 * math.log(2.0))],
    "log1p": [(-1.0, -np.inf), (-2.0, np.nan), (-np.inf, np.nan), (np.inf, np.inf), (0.0, 0.0),
              (1e-30, 1e-30)],
    "tanh": [(np.inf, 1.0), (-np.inf, -1.0), (0.0, 0.0), (20.0, 1.0), (1e-30, 1e-30)],
    "sigmoid": [(np.inf, 1.0), (-np.inf, 0.0), (0.0, 0.5), (200.0, 1.0), (-200.0, 0.0)],
    "softplus": [(np.inf, np.inf), (-np.inf, 0.0), (1e30, 1e30), (-200.0, 0.0)],
    "log_sigmoid": [(np.inf, 0.0), (-np.inf, -np.inf), (-1e30, -1e30), (200.0, 0.0)],
    "erf": [(np.inf, 1.0), (-np.inf, -1.0), (0.0, 0.0), (5.0, 1.0), (-5.0, -1.0)],
    "swish": [(np.inf, np.inf), (-np.inf, 0.0), (0.0, 0.0), (-200.0, 0.0)],
    "gelu_tanh": [(np.inf, np.inf), (-np.inf, 0.0), (0.0, 0.0), (1e30, 1e30), (-1e30, 0.0)],
    "gelu_erf": [(np.inf, np.inf), (-np.inf, 0.0), (0.0, 0.0), (1e30, 1e30), (-1e30, 0.0)],
}


@functools.lru_cache(maxsize=None)
def kernel(name):
    """``_loop`` of ``<name>_f32``, compiled once."""
    return _loop(getattr(fm, name + "_f32"))


def ulp_error(y, ref):
    """|y - ref| in float32 ulps of ref (float64); non-finite float32 references must match."""
    with np.errstate(over="ignore"):
        ref32 = ref.astype(F32)
    finite = np.isfinite(ref32)
    err = np.zeros(y.shape)
    _, ex = np.frexp(ref[finite])
    ulp = np.maximum(np.ldexp(1.0, ex - 24), 2.0 ** -149)
    err[finite] = np.abs(y[finite].astype(np.float64) - ref[finite]) / ulp
    same = (y == ref32) | (np.isnan(y) & np.isnan(ref32))
    err[~finite & ~same] = np.inf
    err[np.isnan(err)] = np.inf
    return err


def full_range_grid():
    mags = np.linspace(0, 0x7F800000, 1 << 20).astype(np.uint32).view(F32)
    edges = np.array([np.inf, np.nan, 1.4e-45, 1e-40, 1.1754942e-38, 1.1754944e-38, 3.4028235e38,
                      88.72283, 88.72284, 88.7229, 103.972, 103.973, 1e-8, 0.5, 1.0, 2.0], F32)
    return np.concatenate([mags, -mags, edges, -edges])


def evaluate(name, x):
    ref_fn = CASES[name][0]
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        ref = ref_fn(x64)
        if name in ("swish", "gelu_tanh", "gelu_erf"):
            ref[x == -np.inf] = -0.0  # limit x * (something -> 0); the formula gives nan
        y = kernel(name)(x)
    assert y.dtype == F32
    return ulp_error(y, ref)


def check_bound(name, x, err, bound):
    if name == "gelu_tanh":
        with np.errstate(all="ignore"):
            z = np.abs(_gelu_z(x.astype(np.float64)))
        allowed = np.where(x >= 0, GELU_TANH_POS_BOUND, GELU_TANH_Z_SLOPE * (1.0 + z))
        allowed[~np.isfinite(x)] = 0.0
    else:
        allowed = bound
    bad = err > allowed
    if bad.any():
        i = int(np.argmax(np.where(bad, err, -1)))
        pytest.fail(f"{name}_f32({x[i]!r}): {err[i]:.3f} ulp exceeds the documented bound "
                    f"({np.sum(bad)} of {x.size} points)")


@pytest.mark.parametrize("name", sorted(CASES))
def test_full_range(name):
    x = full_range_grid()
    check_bound(name, x, evaluate(name, x), CASES[name][1])


@pytest.mark.parametrize("name", sorted(CASES))
def test_interesting_range(name):
    lo, hi = CASES[name][2]
    x = np.linspace(lo, hi, 1 << 20, dtype=np.float64).astype(F32)
    check_bound(name, x, evaluate(name, x), CASES[name][3])


@pytest.mark.parametrize("name", sorted(SPECIALS))
def test_special_values(name):
    xs, want = zip(*SPECIALS[name], (np.nan, np.nan))
    got = kernel(name)(np.array(xs, F32))
    np.testing.assert_array_equal(got, np.array(want, F32), err_msg=f"{name}_f32 at {xs}")


def test_near_zero_is_relatively_accurate():
    """expm1, log1p, tanh and erf keep full relative accuracy for tiny arguments."""
    x = np.concatenate([np.geomspace(1e-38, 1e-2, 20000), -np.geomspace(1e-38, 1e-2, 20000)])
    x = x.astype(F32)
    for name in ("expm1", "log1p", "tanh", "erf"):
        check_bound(name, x, evaluate(name, x), CASES[name][3])


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_only_and_vectorized(name):
    fn = getattr(fm, name + "_f32")
    scalar = numba.njit(fn.py_func)
    scalar(F32(0.5))
    assert str(scalar.nopython_signatures[0].return_type) == "float32"
    kernel(name)(np.ones(64, F32))
    ir = "\n".join(kernel(name).inspect_llvm().values())
    assert not re.search(r"\bdouble\b", _body(ir)), f"{name}_f32 computes in float64"
    assert re.search(r"<\d+ x float>", ir), f"{name}_f32 loop did not vectorize"


def _body(ir):
    """The LLVM IR of the kernel's defined functions (declarations excluded)."""
    return "\n".join(line for line in ir.splitlines() if not line.startswith("declare"))


def test_exp2_of_non_positive_arguments():
    """exp2_nonpos_f32 (the attention kernel's softmax in base 2): v in [-160, 0], dense, and
    its clamp and specials; vectorized like the others."""
    apply = _loop(fm.exp2_nonpos_f32)
    x = np.concatenate([np.linspace(-160, 0, 1 << 20), -np.geomspace(1e-30, 1, 4096)])
    x = x.astype(F32)
    err = ulp_error(apply(x), np.exp2(x.astype(np.float64)))
    assert err.max() <= 1.5, f"{err.max():.2f} ulp at v = {x[np.argmax(err)]!r}"
    specials = np.array([0.0, -0.0, -1.0, -149.0, -150.5, -161.0, -1e30, -np.inf, np.nan], F32)
    want = np.array([1.0, 1.0, 0.5, 2.0 ** -149, 0.0, 0.0, 0.0, 0.0, np.nan], F32)
    np.testing.assert_array_equal(apply(specials), want)
    assert re.search(r"<\d+ x float>", "\n".join(apply.inspect_llvm().values()))


def _loop(fn):
    """A Numba loop applying ``fn`` elementwise with the generated kernels' fast-math flags."""
    @numba.njit(fastmath=set(fm.KERNEL_FASTMATH))
    def apply(x):
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = fn(x[i])
        return out
    return apply


@pytest.mark.parametrize("name", fm.__all__)
def test_a_call_from_python_is_a_named_error(name):
    """The functions are built for compiled callers only (no CPython wrapper: a faster cold
    compile); a call from Python raises instead of jumping to the wrapper that is not there.
    The two erf functions are inlined into their callers by Numba and work from Python too."""
    args = (np.ones(4, np.float32), 4) if name == "row_max" else (np.float32(0.5),)
    if name in ("erf_f32", "gelu_erf_f32"):
        assert 0 < float(getattr(fm, name)(*args)) < 1
        return
    with pytest.raises(TypeError, match="called from compiled code only"):
        getattr(fm, name)(*args)
