"""Independent references and input makers for ``op_samples`` (STYLE §10).

Each reference is written from the op's definition — Python's ``math`` module applied element
by element (``pw``), explicit index maps (``build``), loops over reduced slices (``red``) —
never by calling the op or copying its numpy code, so a wrong impl cannot agree with it.
Random ops have no reference: the ``check_*`` functions test range and moments instead.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable

import numpy as np

# --------------------------------------------------------------------------------------------
# Input makers (deterministic)
# --------------------------------------------------------------------------------------------

_rng = np.random.default_rng(20240501)


def central_differences(f: Callable[[np.ndarray], float], at: np.ndarray,
                        eps: float = 1e-6) -> np.ndarray:
    """The gradient of the scalar ``f`` at ``at`` by central differences (float64)."""
    at = np.asarray(at, np.float64)
    grad = np.zeros_like(at)
    for i in range(at.size):
        d = np.zeros_like(at)
        d.flat[i] = eps
        grad.flat[i] = (f(at + d) - f(at - d)) / (2 * eps)
    return grad


def u(*shape: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    """Uniform floats."""
    return _rng.uniform(lo, hi, shape)


def pos(*shape: int, lo: float = 0.5, hi: float = 3.0) -> np.ndarray:
    return u(*shape, lo=lo, hi=hi)


def iv(*shape: int, lo: int = -3, hi: int = 3) -> np.ndarray:
    """Integral values in [lo, hi] stored as float64 (so they cast exactly to any dtype)."""
    return _rng.integers(lo, hi + 1, shape).astype(np.float64)


def nonzero_iv(*shape: int, lo: int = -3, hi: int = 3) -> np.ndarray:
    x = iv(*shape, lo=lo, hi=hi)
    return np.where(x == 0, hi, x)


def away_from_int(*shape: int, lo: float = -3.0, hi: float = 3.0) -> np.ndarray:
    """Floats whose fractional part is in [0.1, 0.4] or [0.6, 0.9]: far from floor/round kinks."""
    whole = _rng.integers(int(lo), int(hi), shape).astype(np.float64)
    frac = _rng.uniform(0.1, 0.4, shape) + 0.5 * _rng.integers(0, 2, shape)
    return whole + frac


def idx(values: Any, dtype: Any = np.int64) -> np.ndarray:
    return np.asarray(values, dtype=dtype)


def random_signs(shape):
    return np.where(_rng.random(shape) < 0.5, -1.0, 1.0)


def truthy_block(*shape):
    x = iv(*shape, lo=1, hi=3)
    x.flat[::5] = 0.0  # some zeros, but not in every slice
    return x


# --------------------------------------------------------------------------------------------
# Reference builders
# --------------------------------------------------------------------------------------------


def pw(f: Callable) -> Callable:
    """Elementwise reference: broadcast the inputs, apply Python scalar ``f`` to each element
    (``math`` functions in float64, exact Python ints), attributes passed as keywords."""
    def ref(*xs: Any, **attrs: Any) -> np.ndarray:
        arrays = np.broadcast_arrays(*(np.asarray(x) for x in xs))
        shape = arrays[0].shape
        vals = [f(*(a[i].item() for a in arrays), **attrs) for i in np.ndindex(*shape)]
        return np.array(vals).reshape(shape)
    return ref


def build(shape: tuple[int, ...], f: Callable) -> np.ndarray:
    """Array of ``shape`` whose element at index ``i`` (a tuple) is ``f(i)``."""
    shape = tuple(shape)
    vals = [f(i) for i in np.ndindex(*shape)]
    return np.array(vals).reshape(shape) if vals else np.zeros(shape)


def item(x: np.ndarray, i: tuple) -> Any:
    return x[tuple(i)].item()


def red(f: Callable, **fixed: Any) -> Callable:
    """Reduction reference: ``f(list_of_values, **attrs)`` per output element; the values of
    one slice are listed in C order (so arg-reductions over all dims see flat order)."""
    def ref(x, *, dims=None, keep_dims=False, **attrs):
        x = np.asarray(x)
        n = x.ndim
        axes = list(range(n)) if dims is None else sorted(d % n for d in dims)
        kept = [a for a in range(n) if a not in axes]
        kept_shape = tuple(x.shape[a] for a in kept)
        red_shape = tuple(x.shape[a] for a in axes)

        def one(out_i):
            vals = []
            for r in np.ndindex(*red_shape):
                full = [0] * n
                for a, v in zip(kept, out_i):
                    full[a] = v
                for a, v in zip(axes, r):
                    full[a] = v
                vals.append(item(x, full))
            return f(vals, **attrs, **fixed)
        out = build(kept_shape, one)
        if keep_dims:
            out = out.reshape(tuple(1 if a in axes else x.shape[a] for a in range(n)))
        return out
    return ref


def sign_of(v): return (v > 0) - (v < 0)


def fsum_or_sum(v):
    return math.fsum(v) if isinstance(v[0], float) else sum(v)


def mean_of(v): return math.fsum(v) / len(v)


def variance_of(v, bias_corrected=False):
    m = mean_of(v)
    return math.fsum((a - m) ** 2 for a in v) / (len(v) - (1 if bias_corrected else 0))


def first_index(v, pick):
    best = pick(v)
    return v.index(best)


def scan(x, axis, f, identity, exclusive, reverse):
    """Cumulative reference: explicit running loop along ``axis``."""
    x = np.asarray(x)
    ax = axis % x.ndim
    n = x.shape[ax]

    def at(i):
        order = range(n - 1, -1, -1) if reverse else range(n)
        acc = identity
        for j in order:
            src = list(i)
            src[ax] = j
            if j == i[ax]:
                return f(acc, item(x, src)) if not exclusive else acc
            acc = f(acc, item(x, src))
        raise AssertionError
    return build(x.shape, at)


# --------------------------------------------------------------------------------------------
# References of single ops
# --------------------------------------------------------------------------------------------


def matmul_ref(x, y, transpose_x=False, transpose_y=False, transpose_result=False):
    x, y = np.asarray(x), np.asarray(y)
    if transpose_x and x.ndim >= 2:
        x = np.moveaxis(x, -1, -2)
    if transpose_y and y.ndim >= 2:
        y = np.moveaxis(y, -1, -2)
    xv = x[None, :] if x.ndim == 1 else x
    yv = y[:, None] if y.ndim == 1 else y
    out = np.einsum("...ik,...kj->...ij", xv, yv)
    if x.ndim == 1:
        out = out[..., 0, :]
    if y.ndim == 1:
        out = out[..., 0]
    if transpose_result and out.ndim >= 2:
        out = np.moveaxis(out, -1, -2)
    return out


def softmax_ref(x, dim=-1):
    e = pw(math.exp)(x)
    return e / e.sum(axis=dim, keepdims=True)


def log_softmax_ref(x, dim=-1):
    e = pw(math.exp)(x)
    return x - pw(math.log)(e.sum(axis=dim, keepdims=True))


def placed(p, x, axes):
    """A parameter over the normalized ``axes`` reshaped to broadcast against x."""
    p = np.asarray(p)
    shape = [1] * x.ndim
    for a, d in zip(axes[len(axes) - p.ndim:], p.shape):
        shape[a] = d
    return p.reshape(shape)


def layer_norm_ref(x, gain, bias=None, *, dims=(-1,), epsilon=1e-5):
    axes = sorted(d % x.ndim for d in dims)
    n = math.prod(x.shape[a] for a in axes)
    mean = x.sum(axis=tuple(axes), keepdims=True) / n
    var = ((x - mean) ** 2).sum(axis=tuple(axes), keepdims=True) / n
    out = (x - mean) / (var + epsilon) ** 0.5 * placed(gain, x, axes)
    return out if bias is None else out + placed(bias, x, axes)


def batch_norm_ref(x, mean, variance, gamma, beta, *, epsilon=1e-5, axis=-1, momentum=None):
    ax = axis % x.ndim  # momentum only matters in training mode (batch_norm_train)

    def at(i):
        m, v, g, b = (p if np.ndim(p) == 0 else p[i[ax]] for p in (mean, variance, gamma, beta))
        return ((item(x, i) - m) / math.sqrt(v + epsilon)) * g + b
    return build(x.shape, at)


def batch_norm_train_ref(x, mean, variance, gamma, beta, *, epsilon, axis, momentum):
    """Per channel c: the values at every index whose ``axis`` entry is c, their mean and
    biased variance (sums over that list), the normalized values, the moved statistics."""
    ax = axis % x.ndim
    stats = []
    for c in range(x.shape[ax]):
        vals = [item(x, i) for i in np.ndindex(*x.shape) if i[ax] == c]
        m = math.fsum(vals) / len(vals)
        stats.append((m, math.fsum((v - m) ** 2 for v in vals) / len(vals)))

    def param(p, c):
        return p if np.ndim(p) == 0 else p[c]

    def at(i):
        c = i[ax]
        m, v = stats[c]
        return (item(x, i) - m) / math.sqrt(v + epsilon) * param(gamma, c) + param(beta, c)
    new_mean = [momentum * mean[c] + (1 - momentum) * stats[c][0] for c in range(len(stats))]
    new_var = [momentum * variance[c] + (1 - momentum) * stats[c][1] for c in range(len(stats))]
    return build(x.shape, at), np.array(new_mean), np.array(new_var)


def check_dropout_mask(r, a, x_shape=None):
    """Values are 0 or 1/p; the kept fraction is p within 6 standard errors."""
    p = a["p"]
    vals = r.astype(np.float64).ravel()
    scale = float(np.asarray(1.0 / p, dtype=r.dtype))
    assert set(np.unique(vals).tolist()) <= {0.0, scale}
    kept = (vals != 0).mean()
    assert abs(kept - p) < 6 * math.sqrt(p * (1 - p) / vals.size) + 1e-12


def concat_ref(*xs, axis=0):
    ax = axis % xs[0].ndim
    shape = list(xs[0].shape)
    shape[ax] = sum(x.shape[ax] for x in xs)

    def at(i):
        k = i[ax]
        for x in xs:
            if k < x.shape[ax]:
                j = list(i)
                j[ax] = k
                return item(x, j)
            k -= x.shape[ax]
    return build(shape, at)


def stack_ref(*xs, axis=0):
    ax = axis % (xs[0].ndim + 1)
    shape = list(xs[0].shape)
    shape.insert(ax, len(xs))
    return build(shape, lambda i: item(xs[i[ax]], i[:ax] + i[ax + 1:]))


def unstack_ref(x, *, axis=0):
    ax = axis % x.ndim
    part = x.shape[:ax] + x.shape[ax + 1:]
    return tuple(build(part, lambda i, k=k: item(x, i[:ax] + (k,) + i[ax:]))
                 for k in range(x.shape[ax]))


def split_ref(x, *, num_or_sizes, axis=0):
    ax = axis % x.ndim
    n = x.shape[ax]
    if len(num_or_sizes) == 1:
        sizes = [n // num_or_sizes[0]] * num_or_sizes[0]
    else:
        rest = n - sum(s for s in num_or_sizes if s != -1)
        sizes = [rest if s == -1 else s for s in num_or_sizes]
    parts, start = [], 0
    for s in sizes:
        shape = x.shape[:ax] + (s,) + x.shape[ax + 1:]
        parts.append(build(shape, lambda i, o=start: item(x, i[:ax] + (i[ax] + o,) + i[ax + 1:])))
        start += s
    return tuple(parts)


def mirror_source(k, n, mode):
    """Index of the element of a size-``n`` dim that lands at offset ``k`` (from the first
    element, may be negative or >= n) when padding in ``mode``; None for constant padding."""
    if mode == "constant":
        return k if 0 <= k < n else None
    if mode == "reflect":                # mirror without repeating the edge
        if n == 1:
            return 0
        m = k % (2 * (n - 1))
        return m if m < n else 2 * (n - 1) - m
    m = k % (2 * n)                      # symmetric: mirror repeating the edge
    return m if m < n else 2 * n - 1 - m


def pad_ref(x, *, paddings, mode="constant", constant=0.0):
    shape = [d + b + e for d, (b, e) in zip(x.shape, paddings)]

    def at(i):
        src = [mirror_source(k - b, n, mode) for k, (b, _), n in zip(i, paddings, x.shape)]
        return constant if None in src else item(x, src)
    return build(shape, at)


def pad_grad_ref(g, like, *, paddings, mode="constant"):
    """Adjoint of pad: every element of g added to the element of like's shape it came from."""
    shape = np.shape(like)
    out = {j: [] for j in np.ndindex(*shape)}
    for i in np.ndindex(*g.shape):
        src = [mirror_source(k - b, n, mode) for k, (b, _), n in zip(i, paddings, shape)]
        if None not in src:
            out[tuple(src)].append(item(g, i))
    return build(shape, lambda j: math.fsum(out[j]))


def reshape_like_ref(g, like):
    return reshape_ref(np.asarray(g), shape=np.shape(like))


def slice_grad_ref(g, like, *, index):
    """Zeros of like's shape with g's elements at the positions ``like[index]`` selects: each
    index item either fixes a dim (int), walks it (slice), or adds a size-1 dim (newaxis)."""
    shape = np.shape(like)
    items = list(index)
    if "ellipsis" in items:
        k = items.index("ellipsis")
        consumed = sum(1 for t in items if t not in ("newaxis", "ellipsis"))
        items[k:k + 1] = [("slice", None, None, None)] * (len(shape) - consumed)
    consumed = sum(1 for t in items if t != "newaxis")
    items += [("slice", None, None, None)] * (len(shape) - consumed)
    out = {j: 0.0 for j in np.ndindex(*shape)}
    for i in np.ndindex(*g.shape):
        target, gi, dim = [], 0, 0
        for t in items:
            if t == "newaxis":
                gi += 1
                continue
            n = shape[dim]
            if isinstance(t, int):
                target.append(t % n)
            else:
                target.append(list(range(n))[slice(*t[1:])][i[gi]])
                gi += 1
            dim += 1
        out[tuple(target)] = item(g, i)
    return build(shape, lambda j: out[j])


def split_like_ref(g, *likes, axis=0):
    ax = axis % g.ndim
    parts, start = [], 0
    for x in likes:
        n = np.shape(x)[ax]
        shape = g.shape[:ax] + (n,) + g.shape[ax + 1:]
        parts.append(build(shape, lambda i, o=start: item(g, i[:ax] + (i[ax] + o,) + i[ax + 1:])))
        start += n
    return tuple(parts)


def one_hot_ref(indices, *, depth, axis=-1, on=1.0, off=0.0, dtype=None):
    ax = axis % (indices.ndim + 1)
    shape = indices.shape[:ax] + (depth,) + indices.shape[ax:]
    return build(shape, lambda i: on if item(indices, i[:ax] + i[ax + 1:]) == i[ax] else off)


#: how a scatter combines the value there with an update (one element at a time)
_SCATTER_COMBINE = {"add": lambda a, b: a + b, "update": lambda a, b: b,
                    "mul": lambda a, b: a * b, "max": max, "min": min}


def scatter_ref(mode):
    combine = _SCATTER_COMBINE[mode]

    def ref(ref_, indices, updates):
        out = np.array(ref_, dtype=object)
        upd = np.broadcast_to(updates, indices.shape + ref_.shape[1:])
        n = ref_.shape[0]
        for k in np.ndindex(*indices.shape):
            row = int(indices[k]) % n
            for j in np.ndindex(*ref_.shape[1:]):
                out[(row,) + j] = combine(out[(row,) + j], upd[k + j].item())
        return np.array(out.tolist())
    return ref


def round_half_away(v):
    r = Fraction(v)  # exact: no rounding in |v| + 1/2
    return math.copysign(math.floor(abs(r) + Fraction(1, 2)), v)


def dot_ref(x, y, *, dims=None):
    prod = pw(lambda a, b: a * b)(x, y)
    return red(math.fsum if prod.dtype.kind == "f" else sum)(prod, dims=dims)


def arange_ref(start, stop=None, step=1.0, dtype=None):
    if stop is None:
        start, stop = 0.0, start
    n = max(0, math.ceil((stop - start) / step))
    return build((n,), lambda i: start + i[0] * step)


def reshape_ref(x, *, shape, order="c"):
    # the k-th element in the order's reading sequence ('c': last index fastest, 'f': first)
    # is written to the k-th position of the output in the same sequence
    o = order.upper()
    flat = [item(x, np.unravel_index(k, x.shape, order=o)) for k in range(x.size)]
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        shape = tuple(len(flat) // known if d == -1 else d for d in shape)
    return build(shape, lambda i: flat[int(np.ravel_multi_index(i, shape, order=o))]
                 if shape else flat[0])


def permute_ref(x, *, dims):
    out_shape = tuple(x.shape[d] for d in dims)

    def at(i):
        src = [0] * x.ndim
        for k, d in enumerate(dims):
            src[d] = i[k]
        return item(x, src)
    return build(out_shape, at)


def expand_ref(x, *, axis):
    ax = axis % (x.ndim + 1)
    return build(x.shape[:ax] + (1,) + x.shape[ax:], lambda i: item(x, i[:ax] + i[ax + 1:]))


def squeeze_ref(x, *, axis=None):
    drop = ([a for a, d in enumerate(x.shape) if d == 1] if axis is None
            else [a % x.ndim for a in axis])
    keep = [a for a in range(x.ndim) if a not in drop]

    def at(i):
        src = [0] * x.ndim
        for a, v in zip(keep, i):
            src[a] = v
        return item(x, src)
    return build(tuple(x.shape[a] for a in keep), at)


def slice_ref(x, *, begin, size):
    shape = tuple(d - b if s == -1 else s for d, b, s in zip(x.shape, begin, size))
    return build(shape, lambda i: item(x, [k + b for k, b in zip(i, begin)]))


def tile_ref(x, *, reps):
    n = max(x.ndim, len(reps))
    xs = (1,) * (n - x.ndim) + x.shape
    rs = (1,) * (n - len(reps)) + tuple(reps)
    xr = x.reshape(xs)
    return build(tuple(d * r for d, r in zip(xs, rs)),
                 lambda i: item(xr, [k % d for k, d in zip(i, xs)]))


def repeat_ref(x, *, repeats, axis=None):
    if axis is None:
        flat = list(x.flat)
        return np.array([v for v in flat for _ in range(repeats)])
    ax = axis % x.ndim
    shape = x.shape[:ax] + (x.shape[ax] * repeats,) + x.shape[ax + 1:]
    return build(shape, lambda i: item(x, i[:ax] + (i[ax] // repeats,) + i[ax + 1:]))


def broadcast_ref(x, *, shape):
    k = len(shape) - x.ndim
    return build(shape, lambda i: item(x, [0 if d == 1 else v
                                            for v, d in zip(i[k:], x.shape)]))


def reverse_ref(x, *, dims):
    ds = [d % x.ndim for d in dims]
    return build(x.shape, lambda i: item(x, [n - 1 - k if a in ds else k
                                              for a, (k, n) in enumerate(zip(i, x.shape))]))


def reduce_to_like_ref(g, like):
    g = np.asarray(g)
    shape = np.shape(like)
    lead = g.ndim - len(shape)

    def target(i):  # the element of the result that g[i] is summed into
        return tuple(0 if d == 1 else k for k, d in zip(i[lead:], shape))

    def at(j):
        vals = [item(g, i) for i in np.ndindex(*g.shape) if target(i) == j]
        return math.fsum(vals) if isinstance(vals[0], float) else sum(vals)
    return build(shape, at)


def broadcast_like_ref(g, like):
    g = np.asarray(g)
    return broadcast_ref(g, shape=np.broadcast_shapes(g.shape, np.shape(like)))


# --------------------------------------------------------------------------------------------
# Random-op checks
# --------------------------------------------------------------------------------------------


def check_uniform(r, a):
    assert r.shape == tuple(a["shape"])
    lo, hi = a.get("low", 0.0), a.get("high", 1.0)
    assert np.all((r >= lo) & (r <= hi)), "sample outside [low, high]"
    if r.size >= 200:
        mean_sd = (hi - lo) / math.sqrt(12 * r.size)
        assert abs(r.astype(np.float64).mean() - (lo + hi) / 2) < 6 * mean_sd
        assert r.std() > 0.2 * (hi - lo)


def check_normal(r, a):
    assert r.shape == tuple(a["shape"])
    mean, std = a.get("mean", 0.0), a.get("std", 1.0)
    r = r.astype(np.float64)
    if r.size >= 200:
        assert abs(r.mean() - mean) < 6 * std / math.sqrt(r.size)
        assert abs(r.std() - std) < 0.1 * std


def check_truncated(r, a):
    assert r.shape == tuple(a["shape"])
    mean, std = a.get("mean", 0.0), a.get("std", 1.0)
    r = r.astype(np.float64)
    assert np.all(np.abs(r - mean) <= 2 * std * (1 + 1e-6)), "sample beyond 2 std"
    # the std of a normal truncated at +-2 sigma is 0.8796 sigma
    assert abs(r.mean() - mean) < 6 * std / math.sqrt(r.size)
    assert abs(r.std() - 0.8796 * std) < 0.1 * std


def check_bernoulli(r, a):
    assert r.shape == tuple(a["shape"])
    vals = r.astype(np.float64)
    assert set(np.unique(vals).tolist()) <= {0.0, 1.0}
    p = a.get("p", 0.5)
    assert abs(vals.mean() - p) < 6 * math.sqrt(p * (1 - p) / r.size) + 1e-12


# --------------------------------------------------------------------------------------------
# Discrete Fourier transforms, from the definition X_k = sum_j x_j exp(-2 pi i j k / n)
# --------------------------------------------------------------------------------------------

def _dft_1d(v: list, inverse: bool, scale: float) -> list:
    n, sign = len(v), (1 if inverse else -1)
    return [scale * sum(v[j] * complex(math.cos(2 * math.pi * j * k / n),
                                       sign * math.sin(2 * math.pi * j * k / n))
                        for j in range(n)) for k in range(n)]


def _scale(n: int, norm: str, inverse: bool) -> float:
    if norm == "ortho":
        return 1 / math.sqrt(n)
    return 1 / n if (norm == "forward") != inverse else 1.0


def _resized(v: list, n: int) -> list:
    return (v + [0j] * n)[:n]


def _hermitian_full(half: list, n: int) -> list:
    """The length-n spectrum of a real signal whose first n // 2 + 1 entries are ``half``."""
    h = _resized(half, n // 2 + 1)
    return [h[k] if k <= n // 2 else h[n - k].conjugate() for k in range(n)]


def _along(x: np.ndarray, axis: int, fn: Callable[[list], list]) -> np.ndarray:
    moved = np.moveaxis(np.asarray(x, dtype=complex), axis, -1)
    rows = [fn([complex(v) for v in row]) for row in moved.reshape(-1, moved.shape[-1])]
    out = np.array(rows, dtype=complex).reshape(moved.shape[:-1] + (len(rows[0]),))
    return np.moveaxis(out, -1, axis)


def dft_ref(kind: str) -> Callable:
    """Reference of the one-axis transform ``kind`` (fft, ifft, rfft, irfft, hfft, ihfft)."""
    def one(v: list, n: Any, norm: str) -> list:
        m = len(v)
        if kind in ("fft", "ifft"):
            n = m if n is None else n
            return _dft_1d(_resized(v, n), kind == "ifft", _scale(n, norm, kind == "ifft"))
        if kind in ("rfft", "ihfft"):
            n = m if n is None else n
            out = _dft_1d(_resized(v, n), kind == "ihfft", _scale(n, norm, kind == "ihfft"))
            return out[: n // 2 + 1]
        n = 2 * (m - 1) if n is None else n  # irfft, hfft: a half spectrum in, n reals out
        inverse = kind == "irfft"
        return [c.real for c in _dft_1d(_hermitian_full(v, n), inverse, _scale(n, norm, inverse))]

    def ref(x: Any, *, n: Any = None, axis: int = -1, norm: str = "backward") -> np.ndarray:
        out = _along(x, axis, lambda v: one(v, n, norm))
        return out.real if kind in ("irfft", "hfft") else out
    return ref


def dftn_ref(kind: str) -> Callable:
    """Reference of ``fftn``/``ifftn``/``rfftn``/``irfftn``: the one-axis transforms in turn,
    the real one (r/ir) on the last of the axes."""
    def ref(x: Any, *, s: Any = None, axes: Any = None, norm: str = "backward") -> np.ndarray:
        x = np.asarray(x)
        if axes is None:
            axes = tuple(range(x.ndim - len(s), x.ndim)) if s is not None else tuple(range(x.ndim))
        sizes = [None] * len(axes) if s is None else list(s)
        plain = "ifft" if kind in ("ifftn", "irfftn") else "fft"
        order = list(range(len(axes)))  # irfftn: the real (last) axis after the others
        if kind == "rfftn":  # forward: the real axis first, then the complex ones
            order = order[-1:] + order[:-1]
        for i in order:
            last = i == len(axes) - 1
            one = kind[:-1] if last and kind in ("rfftn", "irfftn") else plain
            x = dft_ref(one)(x, n=sizes[i], axis=axes[i], norm=norm)
        return x
    return ref
