"""Sample rows for the sequence-model ops (``samediff/ops/sequence.py``), with references
written from their definitions."""
from __future__ import annotations

import numpy as np

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_references import u
except ImportError:  # ... or tests/ became one
    from .op_references import u


def _embedding_ref(ids, weight, *, padding_idx):
    """Row ``ids[...]`` of the table, element by element (padding_idx changes only the
    gradient)."""
    out = np.empty((*ids.shape, weight.shape[1]), weight.dtype)
    for index in np.ndindex(*ids.shape):
        out[index] = weight[int(ids[index])]
    return out


def _rms_norm_ref(x, gain, *, dims, epsilon):
    """x / sqrt(mean of squares over ``dims`` + epsilon) * gain, in float64."""
    axes = tuple(d % x.ndim for d in dims)
    x64 = x.astype(np.float64)
    ms = (x64 ** 2).sum(axis=axes, keepdims=True) / np.prod([x.shape[a] for a in axes])
    g = np.asarray(gain, np.float64)
    if g.ndim:
        shape = [1] * x.ndim
        for a, d in zip(axes[-g.ndim:], g.shape):
            shape[a] = d
        g = g.reshape(shape)
    return x64 / np.sqrt(ms + epsilon) * g


def sequence_samples(S):
    ids = np.array([[3, 0, 3], [1, 4, 2]], np.int64)  # (a repeated id: its gradient adds up)
    return {
        "embedding": [
            S([ids, u(5, 4)], {}, _embedding_ref),
            S([np.array([2, 2, 0], np.int32), u(3, 2)], {"padding_idx": 2}, _embedding_ref),
            S([np.array(1), u(4, 3)], {"padding_idx": -1}, _embedding_ref),
        ],
        "rms_norm": [
            S([u(3, 5), u(5)], {}, _rms_norm_ref),
            S([u(2, 3, 4), u(3, 4)], {"dims": (1, 2), "epsilon": 1e-3}, _rms_norm_ref),
            S([u(4, 6), 1.0], {}, _rms_norm_ref),
        ],
    }
