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


def _triangle_ref(lower):
    def ref(x, *, diagonal):
        out = np.zeros_like(x)
        for index in np.ndindex(*x.shape):
            i, j = index[-2], index[-1]
            if (j - i <= diagonal) if lower else (j - i >= diagonal):
                out[index] = x[index]
        return out
    return ref


def _sdpa_ref(q, k, v, mask=None, *, is_causal, scale):
    """Query by query: scores against every key (scaled, masked), softmax, the weighted sum
    of the values; leading dims broadcast."""
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                                *([] if mask is None else [mask.shape[:-2]]))
    length, keys = q.shape[-2], k.shape[-2]
    s = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    full = None if mask is None else np.broadcast_to(mask, (*batch, length, keys))
    out = np.zeros((*batch, length, v.shape[-1]))
    for b in np.ndindex(*batch):
        qb, kb, vb = (np.broadcast_to(a, (*batch, *a.shape[-2:]))[b] for a in (q, k, v))
        for i in range(length):
            scores, allowed = [], []
            for j in range(keys):
                score = float(np.dot(qb[i], kb[j])) * s
                ok = not is_causal or j <= i
                if full is not None:
                    m = full[b][i, j]
                    if full.dtype == np.bool_:
                        ok = ok and bool(m)
                    else:
                        score += float(m)
                scores.append(score)
                allowed.append(ok)
            top = max(sc for sc, ok in zip(scores, allowed) if ok)
            weights = [np.exp(sc - top) if ok else 0.0 for sc, ok in zip(scores, allowed)]
            total = sum(weights)
            out[b][i] = sum(w / total * vb[j] for j, w in enumerate(weights))
    return out


def _sdpa_grad_ref(q, k, v, out, g, *, is_causal, scale):
    """The chain rule query by query, from the definition: p = softmax(s q.k_j) over the keys
    the query sees; out = sum_j p_j v_j, so dv_j += p_j g, and with dp_j = g.v_j the scores'
    gradient is p_j (dp_j - sum_l p_l dp_l), which gives dq = s sum_j ds_j k_j and
    dk_j += s ds_j q. (``out`` is the forward's output: not needed by this derivation.)
    Batch dims broadcast; the gradient of a broadcast input sums over them."""
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    s = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    full = [np.broadcast_to(a, (*batch, *a.shape[-2:])) for a in (q, k, v, g)]
    grads = [np.zeros((*batch, *a.shape[-2:])) for a in (q, k, v)]
    for b in np.ndindex(*batch):
        qb, kb, vb, gb = (a[b] for a in full)
        dq, dk, dv = (d[b] for d in grads)
        for i in range(qb.shape[0]):
            seen = [j for j in range(kb.shape[0]) if not is_causal or j <= i]
            scores = [s * float(np.dot(qb[i], kb[j])) for j in seen]
            top = max(scores)
            weights = [np.exp(x - top) for x in scores]
            p = [w / sum(weights) for w in weights]
            dp = [float(np.dot(gb[i], vb[j])) for j in seen]
            mean = sum(pj * dpj for pj, dpj in zip(p, dp))
            for j, pj, dpj in zip(seen, p, dp):
                dv[j] += pj * gb[i]
                ds = pj * (dpj - mean)
                dq[i] += s * ds * kb[j]
                dk[j] += s * ds * qb[i]
    return tuple(_sum_to(d, a.shape) for d, a in zip(grads, (q, k, v)))


def _sum_to(x, shape):
    """``x`` summed over the leading dims ``shape`` lacks and those it has as 1."""
    x = x.sum(axis=tuple(range(x.ndim - len(shape)))) if x.ndim > len(shape) else x
    ones = tuple(i for i, n in enumerate(shape) if n == 1 and x.shape[i] != 1)
    return x.sum(axis=ones, keepdims=True) if ones else x


def _sdpa_grad_sample(S, q, k, v, **attrs):
    """A row of the gradient op: its inputs with the forward's true output (the reference)."""
    a = {"is_causal": False, "scale": None, **attrs}
    out = _sdpa_ref(q, k, v, **a)
    return S([q, k, v, out, u(*out.shape)], attrs, _sdpa_grad_ref)


def _dpa_ref(queries, keys, values, mask=None, *, scaled):
    """ND4J's layout, feature-major: swap to position-major, attend (keys where the mask is
    non-zero), swap back."""
    swap = (lambda a: np.swapaxes(a, -1, -2))
    if mask is not None:
        mask = (mask != 0).reshape(mask.shape[0], *[1] * (queries.ndim - 2), mask.shape[1])
    out = _sdpa_ref(swap(queries), swap(keys), swap(values), mask, is_causal=False,
                    scale=None if scaled else 1.0)
    return swap(out)


def _mha_ref(q, k, v, wq, wk, wv, wo, mask=None, *, scaled):
    """Head by head: project (W x), attend (ND4J's layout), then concatenate the heads along
    the features and project by Wo."""
    heads = []
    for h in range(wq.shape[0]):
        qh, kh, vh = (np.einsum("pi,bit->bpt", w[h], x) for w, x in ((wq, q), (wk, k), (wv, v)))
        heads.append(_dpa_ref(qh, kh, vh, mask, scaled=scaled))
    joined = np.concatenate(heads, axis=1)  # [b, heads * pv, Tq]
    return np.einsum("ko,bkt->bot", wo, joined)


def sequence_samples(S):
    ids = np.array([[3, 0, 3], [1, 4, 2]], np.int64)  # (a repeated id: its gradient adds up)
    keep = np.array([[True, False, True, True, False], [False, False, True, False, True],
                     [True, True, True, True, True]])
    return {
        "scaled_dot_product_attention": [
            S([u(2, 3, 4), u(2, 5, 4), u(2, 5, 3)], {}, _sdpa_ref),
            S([u(2, 4, 3), u(2, 4, 3), u(1, 4, 2)], {"is_causal": True}, _sdpa_ref),
            S([u(2, 3, 4), u(5, 4), u(5, 2), keep], {}, _sdpa_ref),
            S([u(3, 4), u(5, 4), u(5, 3), u(1, 3, 5)], {"scale": 0.5}, _sdpa_ref),
        ],
        "scaled_dot_product_attention_grad": [
            _sdpa_grad_sample(S, u(2, 3, 4), u(2, 5, 4), u(2, 5, 3)),
            _sdpa_grad_sample(S, u(2, 4, 3), u(1, 4, 3), u(2, 4, 2), is_causal=True, scale=0.5),
        ],
        "dot_product_attention": [
            S([u(2, 4, 3), u(2, 4, 5), u(2, 2, 5)], {}, _dpa_ref),
            S([u(2, 2, 3, 4), u(2, 2, 3, 4), u(2, 2, 2, 4)], {"scaled": False}, _dpa_ref),
            S([u(2, 4, 3), u(2, 4, 5), u(2, 2, 5),
               np.array([[1, 0, 1, 1, 0], [0, 1, 1, 1, 1]])], {}, _dpa_ref),  # (0: masked)
        ],
        "multi_head_dot_product_attention": [
            S([u(2, 4, 3), u(2, 4, 5), u(2, 4, 5), u(2, 3, 4), u(2, 3, 4), u(2, 2, 4), u(4, 3)],
              {}, _mha_ref),
            S([u(1, 3, 4), u(1, 3, 4), u(1, 3, 4), u(3, 2, 3), u(3, 2, 3), u(3, 1, 3), u(3, 2),
               np.array([[1, 1, 0, 1]])], {"scaled": False}, _mha_ref),
        ],
        "tril": [S([u(3, 4)], {}, _triangle_ref(True)),
                 S([u(2, 3, 3)], {"diagonal": -1}, _triangle_ref(True)),
                 S([u(4, 2)], {"diagonal": 1}, _triangle_ref(True))],
        "triu": [S([u(3, 4)], {}, _triangle_ref(False)),
                 S([u(2, 3, 3)], {"diagonal": 1}, _triangle_ref(False))],
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
