"""Sample rows of the ops in samediff/ops/onnx_shape.py, added to op_samples.SAMPLES like the
cnn families' rows. References are written element by element (plain loops)."""
from __future__ import annotations

import numpy as np

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_references import idx, iv, pos, scatter_ref, u
except ImportError:  # ... or tests/ became one
    from .op_references import idx, iv, pos, scatter_ref, u

_NUMERIC = ("float32", "float64", "int32", "int64")


def _nonzero_ref(x):
    """One column per non-zero element, in row-major order."""
    coords = [i for i in np.ndindex(*x.shape) if x[i] != 0]
    return np.array(coords, dtype=np.int64).reshape(len(coords), x.ndim).T


def _unique_ref(x, *, sorted, axis):
    """Group equal elements (slices along ``axis``) by first occurrence, then sort them."""
    if axis is None:
        items = [x.reshape(-1)[k] for k in range(x.size)]
        keys = [(v.item(),) for v in items]
    else:
        items = [np.take(x, k, axis=axis) for k in range(x.shape[axis])]
        keys = [tuple(v.reshape(-1).tolist()) for v in items]
    groups: list[tuple] = []  # (key, first index, count)
    which = []
    for k, key in enumerate(keys):
        for g, (gkey, first, count) in enumerate(groups):
            if gkey == key:
                groups[g] = (gkey, first, count + 1)
                which.append(g)
                break
        else:
            groups.append((key, k, 1))
            which.append(len(groups) - 1)
    order = list(range(len(groups)))
    if sorted:
        order.sort(key=lambda g: groups[g][0])
    new = {g: r for r, g in enumerate(order)}
    firsts = [groups[g][1] for g in order]
    y = [items[f] for f in firsts]
    if axis is None:
        y = np.array(y, dtype=x.dtype)
    else:
        y = np.stack(y, axis=axis) if y else np.zeros(
            x.shape[:axis] + (0,) + x.shape[axis + 1:], x.dtype)
    return (y, np.array(firsts, np.int64), np.array([new[g] for g in which], np.int64),
            np.array([groups[g][2] for g in order], np.int64))


def _scatter_reduce_ref(ref_, indices, updates, *, reduction):
    """Fold every update row into its target row, one element at a time."""
    return scatter_ref(reduction)(ref_, indices, updates).astype(np.asarray(ref_).dtype)


def _range_ref(start, limit, delta):
    """start + i * delta for i = 0, 1, ... while the value stays before limit."""
    s, e, d = start.item(), limit.item(), delta.item()
    vals = []
    i = 0
    while (s + i * d < e) if d > 0 else (s + i * d > e):
        vals.append(s + i * d)
        i += 1
    return np.array(vals, dtype=np.asarray(start).dtype)


def _constant_of_shape_ref(shape, *, value, dtype):
    dims = tuple(int(v) for v in shape)
    return np.array([value] * int(np.prod(dims, dtype=np.int64)), dtype=dtype).reshape(dims)


def _shape_of_ref(x):
    return np.array([len(x)] + list(np.shape(x[0]) if len(x) else ()), np.int64) \
        if np.ndim(x) else np.zeros(0, np.int64)


def _reshape_to_ref(x, shape, *, allowzero):
    """ONNX Reshape by its rules: 0 copies (unless allowzero), one -1 takes what is left."""
    dims = [int(d) for d in shape]
    if not allowzero:
        dims = [np.shape(x)[i] if d == 0 else d for i, d in enumerate(dims)]
    if -1 in dims:
        known = 1
        for d in dims:
            known *= d if d != -1 else 1
        dims[dims.index(-1)] = x.size // known
    flat = [x.reshape(-1)[k] for k in range(x.size)]  # row-major order, element by element
    return np.array(flat, dtype=x.dtype).reshape(dims)


def _expand_to_ref(x, shape):
    """Broadcasting by multiplication with ones of the target shape (numpy's two-way rule)."""
    return x * np.ones([int(d) for d in shape], dtype=x.dtype)


def onnx_shape_samples(S) -> dict:
    """The rows of every op of samediff/ops/onnx_shape.py (``S`` is ``op_samples.Sample``)."""
    x3 = np.array([[1, 0, 2], [0, 0, 3]], np.float64)
    mask = np.zeros((2, 3, 2))
    mask[0, 2, 1] = mask[1, 0, 0] = mask[1, 1, 1] = 1.0
    rows_x = np.array([[2, 1, 2, 1], [0, 3, 0, 3], [2, 1, 2, 1]], np.float64)
    return {
        "nonzero": [
            S([x3], {}, _nonzero_ref, dtypes=_NUMERIC, out_dtype="int64"),
            S([mask], {}, _nonzero_ref, out_dtype="int64"),
            S([np.zeros((3,))], {}, _nonzero_ref, out_dtype="int64"),  # nothing non-zero
        ],
        "unique": [
            # (every output of a sample shares one dtype in the suites: int64 data)
            S([np.array([2, 1, 1, 3, 4, 3], np.float64)], {}, _unique_ref, dtypes=("int64",)),
            S([np.array([2, 1, 1, 3, 4, 3], np.float64)], {"sorted": False}, _unique_ref,
              dtypes=("int64",)),
            S([rows_x], {"axis": 1}, _unique_ref, dtypes=("int64",)),  # unique columns
            S([rows_x], {"axis": 0, "sorted": False}, _unique_ref, dtypes=("int64",)),
        ],
        "range": [
            S([np.array(0.3), np.array(2.9), np.array(0.7)], {}, _range_ref),  # 4 values
            S([np.array(2.5), np.array(-1.0), np.array(-0.75)], {}, _range_ref),
            S([np.array([10.0]), np.array([4.0]), np.array([-2.0])], {}, _range_ref,
              dtypes=_NUMERIC),  # one-element vectors, counting down
            S([np.array(3.0), np.array(3.0), np.array(1.0)], {}, _range_ref, dtypes=_NUMERIC),
        ],
        "constant_of_shape": [
            S([idx([2, 3])], {"value": 2.0}, _constant_of_shape_ref, dtypes=_NUMERIC,
              dtype_attr="dtype", dynamic_refuses=True),  # (unknown length: unknown rank)
            S([idx([0, 4], np.int32)], {"value": -1.0}, _constant_of_shape_ref,
              dtype_attr="dtype", dynamic_refuses=True),  # an empty array
            S([idx([], np.int64)], {"value": 0.5}, _constant_of_shape_ref, dtype_attr="dtype",
              dynamic_refuses=True),  # a 0-d array
        ],
        "shape_of": [
            S([iv(2, 3, 4)], {}, _shape_of_ref, dtypes=_NUMERIC, out_dtype="int64"),
            S([u(5)], {}, _shape_of_ref, out_dtype="int64"),
        ],
        # (a shape vector of unknown length gives an unknown rank: refused)
        "reshape_to": [
            S([iv(2, 3, 4), idx([0, -1])], {}, _reshape_to_ref, dtypes=_NUMERIC,
              dynamic_refuses=True),
            S([u(2, 6), idx([3, 2, 2])], {"allowzero": True}, _reshape_to_ref,
              dynamic_refuses=True),
            S([u(4, 3), idx([-1])], {}, _reshape_to_ref, dynamic_refuses=True),
        ],
        "expand_to": [
            S([iv(3, 1), idx([2, 1, 4])], {}, _expand_to_ref, dtypes=_NUMERIC,
              dynamic_refuses=True),
            S([u(2, 3), idx([3])], {}, _expand_to_ref, dynamic_refuses=True),
        ],
        "scatter_reduce": [
            S([pos(5, 3), idx([1, 3, 1]), pos(3, 3)], {"reduction": "mul"},
              _scatter_reduce_ref),  # duplicates multiply
            S([u(4, 2), idx([[0], [-1]]), u(2, 1, 2)], {"reduction": "max"}, _scatter_reduce_ref),
            S([u(6), idx([5, 0, 5]), u(3)], {"reduction": "min"}, _scatter_reduce_ref),
            S([iv(3, 2, lo=1), idx([0, 0]), iv(2, 2, lo=1)], {"reduction": "mul"},
              _scatter_reduce_ref, dtypes=_NUMERIC, smooth=False),
        ],
    }
