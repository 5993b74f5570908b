"""Branch-free, vectorizable float32 elementwise math for generated Numba kernels.

TABLE_PLACEHOLDER
"""
from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["exp_f32", "expm1_f32", "log_f32", "log1p_f32", "tanh_f32", "sigmoid_f32",
           "softplus_f32", "log_sigmoid_f32", "erf_f32", "gelu_tanh_f32", "gelu_erf_f32",
           "swish_f32"]

_jit = numba.njit(inline="always", fastmath=False, cache=False)
_F = np.float32
_I = np.int32

_ZERO, _HALF, _ONE, _TWO = _F(0.0), _F(0.5), _F(1.0), _F(2.0)
_NZERO = _F(-0.0)
_INF, _NAN = _F(np.inf), _F(np.nan)
_MAGIC = _F(12582912.0)              # 1.5 * 2**23: (v + M) - M rounds v to an integer
_LOG2E = _F(1.4426950408889634)
_LN2_C1 = _F(0.693359375)            # 9-bit head of ln 2 (k * C1 exact for |k| < 2**15)
_LN2_C2 = _F(-2.12194440e-4)         # ln 2 - C1
_EXP_HI, _EXP_LO = _F(89.0), _F(-150.0)
_LN2_HI = _F(6.9313812256e-01)       # 0x3f317180: 16-bit head of ln 2
_LN2_LO = _F(9.0580006145e-06)
_TINY = _F(1.1754943508222875e-38)   # smallest normal
_TWO23 = _F(8388608.0)
_BIAS23 = _F(1065353216.0)           # 127 * 2**23
_SQRT_HALF_BITS = _I(0x3f3504f3)
_EXP_MASK = _I(-8388608)             # 0xff800000
_SPLIT_MASK = _I(-4096)              # 0xfffff000: keep the top 12 significant bits
_SHIFT23 = _I(23)

# expm1(r) ~= r + r*r*Q(r) on |r| <= ln2/2 (minimax, rel. err 2.5e-10)
_E2, _E3, _E4 = _F(0.5), _F(0.1666666567325592), _F(0.041666362434625626)
_E5, _E6, _E7 = _F(0.008333389647305012), _F(0.0013940625358372927), _F(0.00019845877250190824)
# log(1+f) = 2 atanh(s), s = f/(2+f);  R(z) = z*(L1 + z*(L2 + z*L3)), z = s*s <= 0.0295
_L1, _L2, _L3 = _F(0.6666677594184875), _F(0.39977526664733887), _F(0.2987215220928192)
# erf(x) ~= x + x*P(x*x) on |x| <= 1
_R0, _R1, _R2 = _F(0.12837916612625122), _F(-0.3761262595653534), _F(0.1128358542919159)
_R3, _R4 = _F(-0.026853812858462334), _F(0.005188329145312309)
_R5, _R6 = _F(-0.0008010203600861132), _F(7.853892020648345e-05)
# erfcx(t) * (1 + 2t) ~= P(q), q = (t-2)/(t+2), t in [0, 10.5] (minimax, rel. err 1e-9)
_C0, _C1, _C2 = _F(1.2769783735275269), _F(-0.09276381880044937), _F(-0.16603052616119385)
_C3, _C4, _C5 = _F(0.16405098140239716), _F(-0.0542178601026535), _F(-0.008030390366911888)
_C6, _C7, _C8 = _F(0.00870960671454668), _F(0.0012513587716966867), _F(-0.001422869972884655)
_C9, _C10, _C11 = _F(-0.00039997926796786487), _F(0.00017189604113809764), _F(8.048198651522398e-05)
_INV_SQRT2 = _F(0.7071067811865476)
_GELU_K = _F(1.5957691216057308)     # 2 * sqrt(2/pi)
_GELU_C = _F(0.044715)


# ----------------------------------------------------------------------------- helpers
@_jit
def _div(a, b):
    # np.divide never raises ZeroDivisionError, so `/` does not add a per-element check
    # (and a branch that blocks vectorization) under Numba's default error_model="python".
    return np.divide(a, b)


@_jit
def _pow2(kf):
    """2**kf for an integral float32 kf in [-126, 127] (NaN -> 0), built from its bits."""
    k = kf if kf == kf else _F(-127.0)
    return _I(k * _TWO23 + _BIAS23).view(np.float32)


@_jit
def _expm1_poly(r):
    q = _E2 + r * (_E3 + r * (_E4 + r * (_E5 + r * (_E6 + r * _E7))))
    return r + (r * r) * q


@_jit
def _exp_reduce(hi, lo):
    """exp(hi + lo) = 2**(k1 + k2) * exp(r); returns (r, k1, k2), |r| <= ln2/2 (+ rounding).

    hi is clamped to [-150, 89] (NaN kept); lo must be small (|lo| < 0.25).  k1, k2 are
    integral floats in [-108, 64] so 2**k1 and 2**k2 are normal numbers.
    """
    x = _EXP_HI if hi > _EXP_HI else hi
    x = _EXP_LO if x < _EXP_LO else x
    kf = ((x + lo) * _LOG2E + _MAGIC) - _MAGIC
    r = ((x - kf * _LN2_C1) + lo) - kf * _LN2_C2
    k1 = (kf * _HALF + _MAGIC) - _MAGIC
    return r, k1, kf - k1


@_jit
def _exp_parts(hi, lo):
    """exp(hi + lo) as a * b with a = exp(r) * 2**k1 (normal or inf) and b = 2**k2.

    Multiplying a small factor into `a` before `b` rounds a subnormal result only once.
    """
    r, k1, k2 = _exp_reduce(hi, lo)
    return (_ONE + _expm1_poly(r)) * _pow2(k1), _pow2(k2)


@_jit
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


@_jit
def _log1p_pos(e):
    """log1p(e) for e in [0, 1] or NaN (no special-value handling needed there)."""
    u = _ONE + e
    return _log_core(u, _ZERO, _div(e - (u - _ONE), u))


@_jit
def _erfcx_scaled(t):
    """erfcx(t) = erfc(t) * exp(t*t) for t >= 0 (t <= 10.5)."""
    q = _div(t - _TWO, t + _TWO)
    p = _C10 + q * _C11
    p = _C6 + q * (_C7 + q * (_C8 + q * (_C9 + q * p)))
    p = _C0 + q * (_C1 + q * (_C2 + q * (_C3 + q * (_C4 + q * (_C5 + q * p)))))
    return _div(p, _ONE + _TWO * t)


@_jit
def _split_sq(x):
    """x*x as hi + lo with hi exact (x's top 12 bits squared) and lo its small correction."""
    xh = np.int32(np.bitwise_and(np.float32(x).view(np.int32), _SPLIT_MASK)).view(np.float32)
    return xh * xh, (x - xh) * (x + xh)


# ----------------------------------------------------------------------------- public
@_jit
def exp_f32(x):
    a, b = _exp_parts(x, _NZERO)
    return a * b


@_jit
def expm1_f32(x):
    r, k1, k2 = _exp_reduce(x, _NZERO)
    s1 = _pow2(k1)
    # 2**k * (em + 1) - 1 == 2**k2 * (2**k1 * em + (2**k1 - 2**-k2)); the inner difference
    # is exact for k <= 24, and k == 0 returns em itself.
    return _pow2(k2) * (s1 * _expm1_poly(r) + (s1 - _pow2(-k2)))


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
    a, b = _exp_parts(-math.fabs(x), _NZERO)
    e = a * b
    return _div(_ONE if x >= _ZERO else e, _ONE + e)


@_jit
def swish_f32(x):
    xn = _EXP_LO if x < _EXP_LO else x
    a, b = _exp_parts(-math.fabs(x), _NZERO)
    return _div(x if x >= _ZERO else (xn * a) * b, _ONE + a * b)


@_jit
def softplus_f32(x):
    a, b = _exp_parts(-math.fabs(x), _NZERO)
    return (x if x > _ZERO else _ZERO) + _log1p_pos(a * b)


@_jit
def log_sigmoid_f32(x):
    a, b = _exp_parts(-math.fabs(x), _NZERO)
    return (x if x < _ZERO else _ZERO) - _log1p_pos(a * b)


@_jit
def erf_f32(x):
    z = x * x
    small = x + x * (_R0 + z * (_R1 + z * (_R2 + z * (_R3 + z * (_R4 + z * (_R5 + z * _R6))))))
    t = math.fabs(x)
    t = _F(4.0) if t > _F(4.0) else t             # erf rounds to 1 beyond 3.92
    a, b = _exp_parts(-(t * t), _NZERO)
    big = math.copysign(_ONE - (_erfcx_scaled(t) * a) * b, x)
    return small if t < _ONE else big


@_jit
def gelu_tanh_f32(x):
    # 0.5*x*(1 + tanh(u)) == x * sigmoid(2u), 2u = K*(x + c*x**3)
    z = _GELU_K * (x + _GELU_C * (x * x * x))
    a, b = _exp_parts(-math.fabs(z), _NZERO)
    xn = _F(-20.0) if x < _F(-20.0) else x
    return _div(x if x >= _ZERO else (xn * a) * b, _ONE + a * b)


@_jit
def gelu_erf_f32(x):
    # 0.5*x*(1 + erf(x/sqrt2)) == 0.5*x*erfc(-x/sqrt2); erfc(t) = erfcx(t) * exp(-t*t), with
    # t*t = x*x/2 formed exactly (hi + lo) from x so exp(-t*t) keeps full relative accuracy.
    xc = _F(-15.0) if x < _F(-15.0) else x
    xc = _F(15.0) if xc > _F(15.0) else xc
    hi, lo = _split_sq(xc)
    a, b = _exp_parts(-_HALF * hi, -_HALF * lo)
    g = _erfcx_scaled(math.fabs(xc) * _INV_SQRT2)
    pos = _HALF * x * (_TWO - (g * a) * b)
    neg = ((_HALF * xc * g) * a) * b
    return pos if x >= _ZERO else neg
