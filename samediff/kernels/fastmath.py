"""Branch-free, vectorizable float32 elementwise math for generated Numba kernels.

A fused kernel that calls ``math.exp``/``math.tanh`` on float32 makes a libm call per element,
which keeps LLVM from vectorizing the loop.  These scalar functions (inlined by LLVM or Numba)
take and return float32 and use only float32 arithmetic (np.float32 constants, no float64
anywhere), integer bit operations through scalar ``.view`` and selects that LLVM turns into
blends, so a loop calling them vectorizes (16 lanes with AVX-512).  Division goes through
``np.divide``, so no ZeroDivisionError branch appears even under error_model="python".

Functions (all ``float32 -> float32``)::

    exp_f32  expm1_f32  log_f32  log1p_f32  tanh_f32  sigmoid_f32  softplus_f32
    log_sigmoid_f32  erf_f32  gelu_tanh_f32  gelu_erf_f32  swish_f32

and ``exp2_nonpos_f32`` (2**v for v <= 0 only: a softmax's shifted scores in base 2).

Methods.  exp: Cody-Waite reduction x = k ln2 + r, degree-6 minimax expm1(r), 2**k built from
the bits of the rounding constant, applied as two factors so subnormal results round once.
expm1: the same pieces recombined without cancellation.  log/log1p: exponent/mantissa split
around sqrt(2), log(1+f) = 2 atanh(f/(2+f)) minimax; log1p adds the exact rounding error of
1 + x.  tanh: expm1(2|x|) / (expm1(2|x|) + 2).  sigmoid/swish/softplus/log_sigmoid: on
e = exp(-|x|) (never overflows).  erf: odd minimax polynomial for |x| < 1, else 1 - erfc with
erfc(t) = exp(-t*t) * erfcx(t), erfcx a minimax polynomial in (t-2)/(t+2).  gelu_tanh:
x / (1 + 2**-y), y = 2u log2(e) (exact reduction).  gelu_erf: 0.5 x erfc(-x/sqrt2) with
x*x/2 split exactly into hi + lo, so the negative tail keeps full relative accuracy.
Polynomial coefficients were fitted for this module (Lawson/minimax in float64).

Error, in float32 ulps of the float64 numpy/scipy result (0.5 = correctly rounded), measured
exhaustively over all 2**32 float32 inputs with the kernels' FMA contraction (KERNEL_FASTMATH;
"interesting" = the same maximum restricted to the range shown).  tests/test_fastmath.py asserts
these bounds (with a little headroom) on dense grids.

    function      max ulp, all float32     interesting range     max ulp there
    exp           1.04  (x = -5.855)       [-20, 20]             1.04
    expm1         1.59  (x = 0.3881)       [-2, 2]               1.59
    log           0.84  (x = 1.4133)       [0.01, 10]            0.84
    log1p         0.84  (x = 0.4133)       [-0.99, 10]           0.84
    tanh          2.57  (x = 0.0624)       [-10, 10]             2.57
    sigmoid       2.40  (x = -4.157)       [-20, 20]             2.40
    softplus      1.66  (x = -1.2679)      [-20, 20]             1.66
    log_sigmoid   1.66  (x = 1.2679)       [-20, 20]             1.66
    erf           1.12  (x = 1.0037)       [-4, 4]               1.12
    swish         3.39  (x = -3.211)       [-20, 20]             3.39
    gelu_tanh     1.79 (x >= 0); x < 0: <= 2.6 (1 + |z|)    [-6, 6]  see below
    gelu_erf      4.68  (x = -10.84)       [-6, 6]               4.65

gelu_tanh, x < 0: the result is ~ x exp(z), z = 2 sqrt(2/pi) (x + 0.044715 x**3), and rounding
the cubic to float32 alone moves exp(z) by ~|z|/2 ulp; the measured error is <= 2.6 (1 + |z|)
ulp (measured before FMA contraction: 3.3 ulp for x >= -1, 8.1 for x >= -2, 13.7 for x >= -3,
62 for x >= -6, 181 overall; the tests check the bound with contraction on dense grids;
relative error < 1.2e-5 for normal results, in a tail where numpy's float32
0.5x(1 + tanh(u)) loses all digits to cancellation).  Everywhere else the error is a few ulp.

Special values: NaN in gives NaN out; exp(-inf) = 0, exp(x > 88.7228) = inf; expm1(-inf) = -1;
log(0) = -inf, log(x < 0) = NaN, log(inf) = inf; log1p(-1) = -inf, log1p(x < -1) = NaN;
tanh/erf(+-inf) = +-1; sigmoid(-inf) = 0; softplus(-inf) = 0; log_sigmoid(-inf) = -inf;
swish/gelu(-inf) = -0, (+inf) = +inf.  Subnormal inputs are handled (log scales them) and
subnormal results are produced (gradual underflow, not flushed): exp(x) is 0 only below
-103.97 where the true value rounds to 0.  Odd functions keep the sign of zero.  sin/cos are
not provided: a branch-free full-range argument reduction cannot be made accurate cheaply.

Speed (2 cores, AVX-512, 4M float32, prange kernel with FMA contraction): gelu_tanh_f32(x*a + b)
takes ~0.9 ms against ~14-18 ms for numpy eager 0.5y(1 + tanh(...)) (15-20x) and ~0.65 ms for
y.copy(); see benchmarks/bench_fastmath.py.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from .jit_options import compiled_only

__all__ = ["exp_f32", "exp2_nonpos_f32", "expm1_f32", "log_f32", "log1p_f32", "tanh_f32",
           "sigmoid_f32", "softplus_f32", "log_sigmoid_f32", "erf_f32", "gelu_tanh_f32",
           "gelu_erf_f32", "swish_f32", "row_max"]

#: LLVM fast-math flags of every generated kernel and of these functions (which compiled code
#: calls only: ``jit_options.compiled_only``): only "contract", which fuses a*b + c into one
#: FMA (one rounding instead of two; the error bounds below are measured with it). No
#: reassociation, no-NaN or no-inf assumptions.
KERNEL_FASTMATH = frozenset({"contract"})

#: Plain Numba functions: LLVM inlines them into a kernel's loop (which then vectorizes) on
#: its own. Numba's IR-level ``inline="always"`` copies a function's IR into every kernel
#: that calls it: ~0.4 s of compile per kernel with a tanh in it (12 kernels of two
#: transcendental ops each: 8.7-10.6 s -> 4.3-5.4 s cold, same run times). Only the
#: helpers and the two erf functions keep it: LLVM's inliner declines erf as too big, and a
#: call per element keeps the loop scalar (``test_float32_only_and_vectorized``).
#: Disk-cached, as plain functions can be: a kernel compiled by a later process loads the
#: ones it calls (~5 ms) instead of compiling them again (exp 0.33 s, tanh 0.26 s cold).
#: Called from compiled code only (``jit_options``: no wrappers, ~12 % of their compile).
_jit = compiled_only(fastmath=set(KERNEL_FASTMATH), cache=True)
_inline = numba.njit(inline="always", fastmath=set(KERNEL_FASTMATH), cache=False)
_F = np.float32
_I = np.int32

_ZERO, _HALF, _ONE, _TWO = _F(0.0), _F(0.5), _F(1.0), _F(2.0)
_NZERO = _F(-0.0)
_INF, _NAN = _F(np.inf), _F(np.nan)
_MAGIC = _F(12582912.0)              # 1.5 * 2**23: (v + M) - M rounds v to an integer
_LOG2E = _F(1.4426950408889634)
_LN2_C1 = _F(0.693359375)            # 9-bit head of ln 2 (k * C1 exact for |k| < 2**15)
_LN2_C2 = _F(-2.12194440e-4)         # ln 2 - C1
_EXP_HI, _EXP_LO = _F(89.0), _F(-130.0)
_LN2_HI = _F(6.9313812256e-01)       # 0x3f317180: 17-bit head of ln 2
_LN2_LO = _F(9.0580006145e-06)
_TINY = _F(1.1754943508222875e-38)   # smallest normal
_TWO23 = _F(8388608.0)
_SQRT_HALF_BITS = _I(0x3f3504f3)
_EXP_MASK = _I(-8388608)             # 0xff800000
_SPLIT_MASK = _I(-4096)              # 0xfffff000: keep the top 12 significant bits
_SHIFT23 = _I(23)
_BIAS_NEG, _BIAS_POS = _I(191 << 23), _I(63 << 23)   # exponent fields of 2**64, 2**-64
_TWO_P64, _TWO_M64 = _F(2.0 ** 64), _F(2.0 ** -64)

# expm1(r) ~= r + r*r*Q(r) on |r| <= ln2/2 (minimax, rel. err 1.4e-8)
_E2, _E3, _E4 = _F(0.4999999701976776), _F(0.16666537523269653), _F(0.041667237877845764)
_E5, _E6 = _F(0.008367233723402023), _F(0.0013882513157650828)
# 2**r ~= 1 + r*P(r) on |r| <= 1/2 (minimax, rel. err 2e-9)
_D1, _D2, _D3 = _F(0.6931471824645996), _F(0.24022647738456726), _F(0.055503323674201965)
_D4, _D5, _D6 = _F(0.00961843691766262), _F(0.0013398873852565885), _F(0.00015353361959569156)
# log(1+f) = 2 atanh(s), s = f/(2+f);  R(z) = z*(L1 + z*(L2 + z*L3)), z = s*s <= 0.0295
_L1, _L2, _L3 = _F(0.6666677594184875), _F(0.39977526664733887), _F(0.2987215220928192)
# erf(x) ~= x + x*P(x*x) on |x| <= 1
_R0, _R1, _R2 = _F(0.12837916612625122), _F(-0.3761262595653534), _F(0.1128358542919159)
_R3, _R4 = _F(-0.026853812858462334), _F(0.005188329145312309)
_R5, _R6 = _F(-0.0008010203600861132), _F(7.853892020648345e-05)
# erfcx(t) * (1 + 2t) ~= P(q), q = (t-2)/(t+2), t in [0, 10.9] (minimax, rel. err 1e-9)
_C0, _C1, _C2 = _F(1.2769783735275269), _F(-0.09276381880044937), _F(-0.16603052616119385)
_C3, _C4, _C5 = _F(0.16405098140239716), _F(-0.0542178601026535), _F(-0.008030390366911888)
_C6, _C7, _C8 = _F(0.00870960671454668), _F(0.0012513587716966867), _F(-0.001422869972884655)
_C9, _C10, _C11 = _F(-0.00039997926796786487), _F(0.00017189604113809764), _F(8.048198651522398e-05)
_INV_SQRT2 = _F(0.7071067811865476)
_GELU_K2 = _F(1.5957691216057308 * 1.4426950408889634)        # 2 sqrt(2/pi) log2(e)
_GELU_KC2 = _F(1.5957691216057308 * 0.044715 * 1.4426950408889634)


# ----------------------------------------------------------------------------- helpers
@_inline
def _div(a, b):
    # np.divide never raises ZeroDivisionError, so `/` does not add a per-element check
    # (and a branch that blocks vectorization) under Numba's default error_model="python".
    return np.divide(a, b)


@_inline
def _expm1_poly(r):
    q = _E2 + r * (_E3 + r * (_E4 + r * (_E5 + r * _E6)))
    return r + (r * r) * q


@_inline
def _exp_reduce(hi, lo, nonpos):
    """exp(hi + lo) = exp(r) * sa * c with |r| <= ln2/2 (+ rounding); returns (r, sa, c, 1/c).

    sa = 2**(k + B) and c = 2**-B with B = 64 for arguments below 43 (k <= 62; a literal
    nonpos=True folds the choice away) and B = -64 above, so sa is a normal number over the
    clamped range hi in [-130, 89] (NaN kept), sa * expm1(r) does not underflow, and
    multiplying by c last rounds a subnormal result once.  lo must be small (|lo| < 0.25).
    sa is assembled with integer ops from the bits of the rounding sum k + MAGIC (no
    float->int conversion, so NaN inputs are harmless).
    """
    x = _EXP_HI if hi > _EXP_HI else hi
    x = _EXP_LO if x < _EXP_LO else x
    t = (x + lo) * _LOG2E + _MAGIC
    kf = t - _MAGIC
    r = ((x - kf * _LN2_C1) + lo) - kf * _LN2_C2
    neg = nonpos | (x < _F(43.0))
    sb = np.add(np.left_shift(np.float32(t).view(np.int32), _SHIFT23),
                _BIAS_NEG if neg else _BIAS_POS)
    c, cinv = (_TWO_M64, _TWO_P64) if neg else (_TWO_P64, _TWO_M64)
    return r, np.int32(sb).view(np.float32), c, cinv


@_inline
def _exp_parts(hi, lo, nonpos):
    """exp(hi + lo) as a * c (see _exp_reduce); fold small factors into a before c."""
    r, sa, c, _ = _exp_reduce(hi, lo, nonpos)
    return (_ONE + _expm1_poly(r)) * sa, c


@_inline
def _exp2_nonpos(v):
    """2**v for v in [-190, 0] or NaN; subnormal results are rounded twice."""
    t = v + _MAGIC
    r = v - (t - _MAGIC)                          # exact, |r| <= 1/2
    sa = np.int32(np.add(np.left_shift(np.float32(t).view(np.int32), _SHIFT23), _BIAS_NEG))
    p = _ONE + r * (_D1 + r * (_D2 + r * (_D3 + r * (_D4 + r * (_D5 + r * _D6)))))
    return (p * sa.view(np.float32)) * _TWO_M64


@_inline
def _log_core(u, kadj, c):
    """log(u) + c for finite u > 0 (u * 2**-kadj normal); c is a small additive correction."""
    ix = np.float32(u).view(np.int32)
    t = np.subtract(ix, _SQRT_HALF_BITS)
    kf = _F(np.right_shift(t, _SHIFT23)) - kadj
    f = np.int32(np.subtract(ix, np.bitwise_and(t, _EXP_MASK))).view(np.float32) - _ONE
    s = _div(f, _TWO + f)
    z = s * s
    rr = z * (_L1 + z * (_L2 + z * _L3))
    hfsq = _HALF * f * f
    return (((s * (hfsq + rr) + (kf * _LN2_LO + c)) - hfsq) + f) + kf * _LN2_HI


@_inline
def _log1p_pos(e):
    """log1p(e) for e in [0, 1] or NaN (no special-value handling needed there)."""
    u = _ONE + e
    return _log_core(u, _ZERO, _div(e - (u - _ONE), u))


@_inline
def _erfcx_scaled(t):
    """erfcx(t) = erfc(t) * exp(t*t) for 0 <= t <= 10.9."""
    q = _div(t - _TWO, t + _TWO)
    p = _C10 + q * _C11
    p = _C6 + q * (_C7 + q * (_C8 + q * (_C9 + q * p)))
    p = _C0 + q * (_C1 + q * (_C2 + q * (_C3 + q * (_C4 + q * (_C5 + q * p)))))
    return _div(p, _ONE + _TWO * t)


@_inline
def _erf_small(x):
    """erf(x) for |x| <= 1."""
    z = x * x
    return x + x * (_R0 + z * (_R1 + z * (_R2 + z * (_R3 + z * (_R4 + z * (_R5 + z * _R6))))))


@_inline
def _split_sq(x):
    """x*x as hi + lo with hi exact (x's top 12 bits squared) and lo its small correction."""
    xh = np.int32(np.bitwise_and(np.float32(x).view(np.int32), _SPLIT_MASK)).view(np.float32)
    return xh * xh, (x - xh) * (x + xh)


# ----------------------------------------------------------------------------- public
@_jit
def exp_f32(x):
    a, c = _exp_parts(x, _NZERO, False)
    return a * c


@_jit
def exp2_nonpos_f32(v):
    """2**v for v <= 0 (a softmax's shifted scores in base 2): 0 below -160, NaN kept; the
    positive half is not handled. Cheaper than ``exp_f32``: no range reduction by ln 2."""
    return _exp2_nonpos(_F(-160.0) if v < _F(-160.0) else v)


@_jit
def expm1_f32(x):
    r, sa, c, cinv = _exp_reduce(x, _NZERO, False)
    # 2**k * (em + 1) - 1 == c * (sa * em + (sa - 1/c)); the difference of the two powers of
    # two is exact for |k| <= 24, and k == 0 returns em itself.
    y = c * (sa * _expm1_poly(r) + (sa - cinv))
    return x if x == _ZERO else y


@_jit
def log_f32(x):
    sub = x < _TINY
    y = _log_core(x * (_TWO23 if sub else _ONE), _F(23.0) if sub else _ZERO, _NZERO)
    special = -_INF if x == _ZERO else (_INF if x == _INF else _NAN)
    return y if (x > _ZERO) & (x < _INF) else special


@_jit
def log1p_f32(x):
    u = _ONE + x
    # exact rounding error of 1 + x (for |x| <= 1), divided by u: log(u + d) ~ log(u) + d/u
    y = _log_core(u, _ZERO, _div(x - (u - _ONE), u))
    special = -_INF if u == _ZERO else (_INF if x == _INF else _NAN)
    y = y if (u > _ZERO) & (x < _INF) else special
    return x if x == _ZERO else y


@_jit
def tanh_f32(x):
    ax = math.fabs(x)
    ax = _F(9.5) if ax > _F(9.5) else ax         # tanh rounds to 1 beyond 9.011
    em = expm1_f32(ax + ax)
    return math.copysign(_div(em, em + _TWO), x)


@_jit
def sigmoid_f32(x):
    a, c = _exp_parts(-math.fabs(x), _NZERO, True)
    e = a * c
    return _div(_ONE if x >= _ZERO else e, _ONE + e)


@_jit
def swish_f32(x):
    xn = _EXP_LO if x < _EXP_LO else x
    a, c = _exp_parts(-math.fabs(x), _NZERO, True)
    return _div(x if x >= _ZERO else (xn * a) * c, _ONE + a * c)


@_jit
def softplus_f32(x):
    a, c = _exp_parts(-math.fabs(x), _NZERO, True)
    return (x if x > _ZERO else _ZERO) + _log1p_pos(a * c)


@_jit
def log_sigmoid_f32(x):
    a, c = _exp_parts(-math.fabs(x), _NZERO, True)
    return (x if x < _ZERO else _ZERO) - _log1p_pos(a * c)


@_inline
def erf_f32(x):
    small = _erf_small(x)
    t = math.fabs(x)
    t = _F(4.0) if t > _F(4.0) else t             # erf rounds to 1 beyond 3.92
    a, c = _exp_parts(-(t * t), _NZERO, True)
    big = math.copysign(_ONE - (_erfcx_scaled(t) * a) * c, x)
    return small if t < _ONE else big


@_jit
def gelu_tanh_f32(x):
    # 0.5*x*(1 + tanh(u)) == x * sigmoid(2u) == x / (1 + 2**-y), y = 2u*log2(e) = x*(K2 + KC2*x*x);
    # log2(e) folded into the constants, so the reduction of y is exact (y carries the rounding
    # of the cubic either way).  2**-160 and x >= -10.9 already give e = 0 / result -0.
    xz = _F(-10.9) if x < _F(-10.9) else x
    v = -math.fabs(xz * (_GELU_K2 + _GELU_KC2 * (xz * xz)))
    e = exp2_nonpos_f32(v)
    return _div(x if x >= _ZERO else xz * e, _ONE + e)


@_inline
def gelu_erf_f32(x):
    # 0.5*x*(1 + erf(x/sqrt2)) == 0.5*x*erfc(-x/sqrt2); erfc(t) = erfcx(t) * exp(-t*t), with
    # t*t = x*x/2 formed exactly (hi + lo) from x so exp(-t*t) keeps full relative accuracy.
    # Near 0 (x/sqrt2 in (-0.5, 1)) 1 + erf is used directly (no cancellation there).
    xc = _F(-15.0) if x < _F(-15.0) else x
    xc = _F(15.0) if xc > _F(15.0) else xc
    hi, lo = _split_sq(xc)
    a, c = _exp_parts(-_HALF * hi, -_HALF * lo, True)
    zs = xc * _INV_SQRT2
    g = _erfcx_scaled(math.fabs(zs))
    near = _HALF * x * (_ONE + _erf_small(zs))
    pos = _HALF * x * (_TWO - (g * a) * c)
    neg = ((_HALF * xc * g) * a) * c
    far = pos if x >= _ZERO else neg
    return near if (zs > _F(-0.5)) & (zs < _ONE) else far


# A max carried across a loop's iterations stays scalar even with fast-math flags (LLVM wants
# them on the whole function): a chain of dependent maxima, ~1 ns per value. Eight independent
# maxima, packed into one vector register, took 0.45x that on softmax rows of 128. (``max``,
# not ``x if x > a else a``: the same code and speed, 0.19 -> 0.15 s of cold compile -- each
# conditional is three blocks of Numba IR.)
@compiled_only(cache=True, nogil=True, fastmath={"nnan", "nsz", "reassoc"})
def row_max(row, n):
    """max(row[:n]), n >= 1, in the row's dtype; a NaN may be skipped -- the callers' next
    step (the exp of ``x - max``) is NaN for it anyway."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = row[0]
    whole = n // 8 * 8
    for j in range(0, whole, 8):
        a0 = max(a0, row[j])
        a1 = max(a1, row[j + 1])
        a2 = max(a2, row[j + 2])
        a3 = max(a3, row[j + 3])
        a4 = max(a4, row[j + 4])
        a5 = max(a5, row[j + 5])
        a6 = max(a6, row[j + 6])
        a7 = max(a7, row[j + 7])
    for j in range(whole, n):
        a0 = max(a0, row[j])
    return max(max(max(a0, a1), max(a2, a3)), max(max(a4, a5), max(a6, a7)))
