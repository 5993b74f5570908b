"""Sample rows of the ops in samediff/ops/onnx_math.py, added to op_samples.SAMPLES like the
cnn families' rows. References are written from the definitions: Python's integer operators
element by element, a sort by explicit keys, cofactor expansion and Gauss-Jordan elimination."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_references import iv, pw, u
except ImportError:  # ... or tests/ became one
    from .op_references import iv, pw, u

INTS = ("int32", "int64")


def _wrap(v: int, like: np.ndarray) -> int:
    """``v`` wrapped to the width of ``like``'s integer dtype (two's complement)."""
    info = np.iinfo(like.dtype)
    span = info.max - info.min + 1
    return (v - info.min) % span + info.min


def _shift_ref(left: bool):
    def ref(x, y):
        xb, yb = np.broadcast_arrays(np.asarray(x), np.asarray(y))
        bits = np.iinfo(xb.dtype).bits
        out = []
        for a, s in zip(xb.reshape(-1).tolist(), yb.reshape(-1).tolist()):
            if left:
                out.append(_wrap(a << s, xb) if s < bits else 0)
            else:  # Python's >> on ints is arithmetic (floor), as for signed machine ints
                out.append(a >> min(s, bits))
        return np.array(out, dtype=xb.dtype).reshape(xb.shape)
    return ref


def _top_k_ref(indices: bool):
    def ref(x, *, k, axis, largest):
        x = np.asarray(x)
        ax = axis % x.ndim
        moved = np.moveaxis(x, ax, -1)
        vals = np.empty(moved.shape[:-1] + (k,), x.dtype)
        idx = np.empty(moved.shape[:-1] + (k,), np.int64)
        for pos in np.ndindex(*moved.shape[:-1]):
            row = moved[pos].tolist()
            # the order ONNX asks for: by value, then by index (the lower index first)
            keyed = sorted(range(len(row)), key=lambda i: ((-row[i] if largest else row[i]), i))
            for j, i in enumerate(keyed[:k]):
                vals[pos + (j,)], idx[pos + (j,)] = row[i], i
        out = idx if indices else vals
        return np.moveaxis(out, -1, ax)
    return ref


def _det_exact(m: list) -> Fraction:
    """Determinant by cofactor expansion along the first row, in exact rationals."""
    if len(m) == 1:
        return m[0][0]
    return sum((-1) ** j * m[0][j] * _det_exact([r[:j] + r[j + 1:] for r in m[1:]])
               for j in range(len(m)))


def _det_ref(x):
    x = np.asarray(x)
    out = np.empty(x.shape[:-2])
    for pos in np.ndindex(*x.shape[:-2]):
        m = [[Fraction(v) for v in row] for row in x[pos].tolist()]
        out[pos] = float(_det_exact(m))
    return out


def _inverse_ref(x):
    """Gauss-Jordan elimination on [A | I] in exact rationals."""
    x = np.asarray(x)
    out = np.empty(x.shape)
    n = x.shape[-1]
    for pos in np.ndindex(*x.shape[:-2]):
        a = [[Fraction(v) for v in row] + [Fraction(int(i == j)) for j in range(n)]
             for i, row in enumerate(x[pos].tolist())]
        for c in range(n):
            p = next(r for r in range(c, n) if a[r][c] != 0)
            a[c], a[p] = a[p], a[c]
            a[c] = [v / a[c][c] for v in a[c]]
            for r in range(n):
                if r != c and a[r][c] != 0:
                    f = a[r][c]
                    a[r] = [v - f * w for v, w in zip(a[r], a[c])]
        out[pos] = [[float(v) for v in row[n:]] for row in a]
    return out


def _well_conditioned(*shape: int) -> np.ndarray:
    """Random matrices plus 3 I: far from singular, so finite differences apply."""
    n = shape[-1]
    return u(*shape) + 3.0 * np.eye(n)


def onnx_math_samples(S) -> dict:
    """The rows of every op of samediff/ops/onnx_math.py (``S`` is ``op_samples.Sample``)."""
    rows: dict = {}
    for name, f in (("bitwise_and", lambda a, b: a & b), ("bitwise_or", lambda a, b: a | b),
                    ("bitwise_xor", lambda a, b: a ^ b)):
        rows[name] = [
            S([iv(3, 1, lo=-9, hi=9), iv(4, lo=-9, hi=9)], reference=pw(f), dtypes=INTS,
              smooth=False),
            S([iv(2, 3, lo=0, hi=1), iv(3, lo=0, hi=1)], reference=pw(lambda a, b, _f=f:
                                                                     bool(_f(int(a), int(b)))),
              dtypes=("bool",), smooth=False),
        ]
    rows["bitwise_not"] = [
        S([iv(2, 3, lo=-9, hi=9)], reference=pw(lambda a: ~a), dtypes=INTS, smooth=False),
        S([iv(4, lo=0, hi=1)], reference=pw(lambda a: not a), dtypes=("bool",), smooth=False),
    ]
    rows["left_shift"] = [
        S([iv(3, 1, lo=0, hi=9), iv(4, lo=0, hi=5)], reference=_shift_ref(True), dtypes=INTS,
          smooth=False),
        # shifts by the bit width and beyond: every bit shifted out
        S([np.array([1.0, 3.0, 5.0, 7.0]), np.array([31.0, 32.0, 63.0, 64.0])],
          reference=_shift_ref(True), dtypes=INTS, smooth=False),
    ]
    rows["right_shift"] = [
        S([iv(3, 1, lo=-99, hi=99), iv(4, lo=0, hi=5)], reference=_shift_ref(False),
          dtypes=INTS, smooth=False),
        S([np.array([-8.0, 8.0, -1.0, 5.0]), np.array([30.0, 32.0, 63.0, 64.0])],
          reference=_shift_ref(False), dtypes=INTS, smooth=False),
    ]
    rows["round_half_even"] = [
        # away from the halves: piecewise constant there, the (zero) gradient applies
        S([np.array([[-2.2, -0.8, 0.3], [1.1, 2.7, -1.3]])],
          reference=pw(lambda v: float(round(v)))),
        S([np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.7, 3.2])],
          reference=pw(lambda v: float(round(v))), smooth=False),  # Python rounds halves to even
        S([iv(2, 3)], reference=pw(lambda v: v), dtypes=INTS, smooth=False),
    ]
    for name, indices in (("top_k", False), ("top_k_indices", True)):
        out = {"out_dtype": "int64"} if indices else {}
        rows[name] = [
            S([u(3, 5)], {"k": 2}, _top_k_ref(indices), **out),
            S([u(4, 3, 2)], {"k": 3, "axis": 0, "largest": False}, _top_k_ref(indices), **out),
            # ties: equal values in index order
            S([iv(2, 6, lo=-1, hi=1)], {"k": 4, "axis": 1}, _top_k_ref(indices),
              dtypes=("float32", "float64") + INTS, smooth=False, **out),
            S([iv(5, 2, lo=0, hi=2)], {"k": 5, "axis": -2, "largest": False},
              _top_k_ref(indices), dtypes=("float32", "float64") + INTS, smooth=False, **out),
        ]
    rows["det"] = [
        S([_well_conditioned(3, 3)], reference=_det_ref),
        S([_well_conditioned(2, 4, 4)], reference=_det_ref),
        S([np.array([[2.0]])], reference=_det_ref),
    ]
    rows["matrix_inverse"] = [
        S([_well_conditioned(3, 3)], reference=_inverse_ref),
        S([_well_conditioned(2, 2, 2)], reference=_inverse_ref),
    ]
    return rows

