"""Window arithmetic of convolution and pooling: pads, output sizes and tap ranges per axis.

Pure Python (no Numba): the ops' shape inference uses it as well as the kernels (``cnn``).
Geometry of one spatial axis: output ``o`` reads input ``o * s - before + t * d`` at tap ``t``.

>>> axis_pads(28, 5, 1, 1, 0)
(0, 0, 24)
>>> tap_range(4, 4, 1, 1, 1, 0)
(slice(1, 4, None), slice(0, 3, 1))
"""
from __future__ import annotations

Pair = tuple[int, int]


def axis_pads(size: int, k: int, s: int, d: int, padding: int | str) -> tuple[int, int, int]:
    """``(before, after, out)`` for one spatial axis of length ``size`` (-1 = unknown: out -1).

    ``padding="same"`` is ND4J's/TensorFlow's SAME: ``out = ceil(size / s)`` and the total
    padding that needs, the odd one after."""
    eff = (k - 1) * d + 1
    if padding == "same":
        if size < 0:
            return 0, 0, -1
        out = -(-size // s)
        total = max((out - 1) * s + eff - size, 0)
        return total // 2, total - total // 2, out
    p = int(padding)
    if size < 0:
        return p, p, -1
    out = (size + 2 * p - eff) // s + 1
    if out <= 0:
        raise ValueError(f"a kernel spanning {eff} does not fit {size} (+ 2 x {p} padding)")
    return p, p, out


def tap_range(out: int, size: int, before: int, s: int, d: int, t: int) -> tuple[slice, slice]:
    """(output slice, input slice) of tap ``t`` on one axis: the outputs whose input index
    ``o * s - before + t * d`` lies in ``[0, size)``, and those inputs (stride ``s``)."""
    off = t * d - before
    lo = 0 if off >= 0 else (-off + s - 1) // s  # smallest o with o * s + off >= 0
    hi = min(out, (size - 1 - off) // s + 1) if size - 1 - off >= 0 else 0
    if hi <= lo:
        return slice(0, 0), slice(0, 0)
    start = lo * s + off
    return slice(lo, hi), slice(start, start + (hi - lo - 1) * s + 1, s)


def spatial(shape: tuple[int, ...], cf: bool) -> tuple[int, int]:
    return (shape[2], shape[3]) if cf else (shape[1], shape[2])


def geometry(hw: tuple[int, int], kernel: Pair, stride: Pair, padding, dilation: Pair):
    """Per spatial axis ``(before, after, out)`` for spatial sizes ``hw``."""
    return [axis_pads(hw[a], kernel[a], stride[a], dilation[a],
                      "same" if padding == "same" else padding[a]) for a in range(2)]


def out_shape(shape, geo, channels: int, cf: bool) -> tuple[int, ...]:
    oh, ow = geo[0][2], geo[1][2]
    return (shape[0], channels, oh, ow) if cf else (shape[0], oh, ow, channels)
