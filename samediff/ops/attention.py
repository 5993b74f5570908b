"""Attention: ``scaled_dot_product_attention`` with PyTorch's layout and semantics.

``scaled_dot_product_attention(q, k, v, mask=None, is_causal=False, scale=None)``:
``softmax(q @ k^T * scale + mask) @ v`` for ``q [..., L, E]``, ``k [..., S, E]``,
``v [..., S, Ev]`` (leading dims broadcast, as ``matmul``'s), giving ``[..., L, Ev]``.
``scale`` defaults to ``1 / sqrt(E)``. A bool ``mask`` (broadcastable to ``[..., L, S]``) says
which keys each query may attend to (True: attend); a float mask is added to the scores.
``is_causal`` masks the keys after each query (``tril`` of an ``L x S`` array of ones, as
PyTorch); it cannot be combined with a mask. A query that may attend to no key gets NaN, as
PyTorch's reference.

float32 attention without a mask, from ``KERNEL_MIN_WORK``, runs the compiled forward
(``kernels/attention.py``: blocks of queries, fused vectorized softmax, the (batch, head)
pairs over two threads, heads read through their strides); everything else the numpy route
below, which computes the same thing.

The forward pass works on blocks of ``QUERY_BLOCK`` queries: at no time does it hold the
``L x S`` scores of a head, only a block's (memory O((L + S) * E + QUERY_BLOCK * S) per head);
with ``is_causal`` a block reads only the keys its queries may see (half the work at L = S).
Its gradient is written with table ops (``P = softmax(scores)``, ``dV = P^T dO``,
``dS = P * (dP - rowsum(dP * P))``, ``dQ = dS K scale``, ``dK = dS^T Q scale``), which hold
``P``: O(L * S) per head in the backward pass.
"""
from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..errors import GradientError, OpError
from ..kernels import forksafe
from .adjoints import sum_to_shape_of
from .call import op
from .families import Attr, broadcast_shapes
from .registry import TensorType, define

#: queries per block of the forward pass
QUERY_BLOCK = 128
#: multiply-adds of the scores (batch * L * S * E) from which float32 attention without a
#: mask runs the compiled forward (``kernels/attention.py``); below, the numpy route
KERNEL_MIN_WORK = 1 << 16


def _default_scale(e: int, scale: float | None) -> float:
    return 1.0 / math.sqrt(e) if scale is None else float(scale)


def _infer(types: list[TensorType], a: Any) -> TensorType:
    q, k, v = types[:3]
    mask = types[3] if len(types) > 3 else None
    for name, t in (("q", q), ("k", k), ("v", v)):
        if len(t.shape) < 2 or t.dtype.kind != "f":
            raise OpError(f"scaled_dot_product_attention: {name} must be a float array of "
                          f"rank >= 2 ([..., length, features]), got {t}")
    if not q.dtype == k.dtype == v.dtype:
        raise OpError(f"scaled_dot_product_attention: q, k and v must share a dtype, got "
                      f"{q.dtype}, {k.dtype} and {v.dtype}")
    (e_q, e_k), (s_k, s_v) = (q.shape[-1], k.shape[-1]), (k.shape[-2], v.shape[-2])
    if e_q >= 0 and e_k >= 0 and e_q != e_k:
        raise OpError(f"scaled_dot_product_attention: q has {e_q} features per position, k "
                      f"{e_k} (q {q}, k {k}); they must agree")
    if s_k >= 0 and s_v >= 0 and s_k != s_v:
        raise OpError(f"scaled_dot_product_attention: k has {s_k} positions, v {s_v} (k {k}, "
                      f"v {v}); they must agree")
    try:
        batch = broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        if mask is not None and len(mask.shape) > 2:  # (a mask's own leading dims add batch)
            batch = broadcast_shapes(batch, mask.shape[:-2])
        scores = (*batch, q.shape[-2], k.shape[-2])
        if mask is not None:
            if a.is_causal:
                raise OpError("scaled_dot_product_attention: give a mask or is_causal=True, "
                              "not both (fold the causal mask into yours)")
            if mask.dtype.kind not in "bf":
                raise OpError(f"scaled_dot_product_attention: the mask must be bool (True: "
                              f"attend) or float (added to the scores), got {mask}")
            broadcast_shapes(mask.shape, scores)
    except ValueError as err:
        raise OpError(f"scaled_dot_product_attention: the batch dims or the mask do not "
                      f"broadcast: {err}") from None
    return TensorType((*batch, q.shape[-2], v.shape[-1]), q.dtype)


def _causal(rows: slice, keys: slice) -> np.ndarray:
    """The causal mask of queries ``rows`` and keys ``keys`` (True: attend): query i sees
    key j when j <= i."""
    return np.arange(keys.start, keys.stop)[None, :] <= np.arange(rows.start, rows.stop)[:, None]


def _block_mask(mask: Any, rows: slice) -> Any:
    """The rows of a mask broadcastable to [..., L, S] that a block of queries needs."""
    mask = np.asarray(mask)
    if mask.ndim >= 2 and mask.shape[-2] != 1:
        return mask[..., rows, :]
    return mask


@forksafe.guarded  # BLAS GEMMs and the helper thread: a fork waits for them
def _sdpa(q: Any, k: Any, v: Any, mask: Any = None, *, is_causal: bool,
          scale: float | None) -> np.ndarray:
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    given = [q, k, v] + ([np.asarray(mask)] if mask is not None else [])
    _infer([TensorType(a.shape, a.dtype) for a in given],  # (eager calls: the same checks)
           SimpleNamespace(is_causal=is_causal, scale=scale))
    dtype = q.dtype
    s = dtype.type(_default_scale(q.shape[-1], scale))
    length, keys = q.shape[-2], k.shape[-2]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                                *([np.shape(mask)[:-2]] if np.ndim(mask) > 2 else []))
    if mask is None and _kernel_fits(q, k, v):
        return _kernel(q, k, v, float(s), is_causal)
    out = np.empty((*batch, length, v.shape[-1]), dtype)
    kt = np.swapaxes(k, -1, -2)
    with np.errstate(invalid="ignore", divide="ignore"):  # fully masked rows: NaN, as PyTorch
        for rows, seen in _blocks(length, keys, is_causal):
            weights, total = _exp_scores(q, kt, rows, seen, s, is_causal, mask)
            # normalized after the product: a pass over [block, Ev] instead of [block, S]
            out[..., rows, :] = np.matmul(weights, v[..., seen, :]) / total
    return out


def _blocks(length: int, keys: int, causal: bool):
    """(queries, keys they read) per block of ``QUERY_BLOCK`` queries: with ``causal`` a
    block reads only the keys before its last query's (the rest are hidden from it)."""
    for start in range(0, length, QUERY_BLOCK):
        rows = slice(start, min(start + QUERY_BLOCK, length))
        yield rows, slice(0, min(rows.stop, keys) if causal and rows.stop > 0 else keys)


def _exp_scores(q: np.ndarray, kt: np.ndarray, rows: slice, seen: slice, s: Any,
                causal: bool, mask: Any) -> tuple[np.ndarray, np.ndarray]:
    """``exp(scores - rowmax)`` of a block of queries and its row sums (the softmax is their
    quotient), the causal mask or ``mask`` applied."""
    # (the scale on the block's queries, not on its scores: E values per query, not S)
    scores = np.matmul(q[..., rows, :] * s, kt[..., seen])  # (in place below)
    if causal:  # (only the keys from rows.start on can be after a query)
        first = min(rows.start, seen.stop)
        np.copyto(scores[..., first:], -np.inf, where=~_causal(rows, slice(first, seen.stop)))
    elif mask is not None:
        m = _block_mask(mask, rows)
        fits = np.broadcast_shapes(m.shape, scores.shape) == scores.shape
        if m.dtype == np.bool_:
            scores = _masked(scores, ~m, fits)
        elif fits:
            scores += m.astype(scores.dtype, copy=False)
        else:
            scores = scores + m.astype(scores.dtype, copy=False)
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    return scores, scores.sum(axis=-1, keepdims=True)


def _kernel_fits(q: np.ndarray, k: np.ndarray, v: np.ndarray, *grad: np.ndarray) -> bool:
    """May the compiled forward (``kernels/attention.py``) -- or with ``grad`` (the output
    and its gradient) the backward -- run: float32, no broadcasting between q, k and v, no
    empty axis, from ``KERNEL_MIN_WORK``, and compiled?"""
    if not (q.dtype == np.float32 and q.shape[:-2] == k.shape[:-2] == v.shape[:-2]
            and 0 not in q.shape + k.shape + v.shape
            and math.prod(q.shape[:-1]) * k.shape[-2] * q.shape[-1] >= KERNEL_MIN_WORK):
        return False
    from ..kernels import attention as kernels  # (imports Numba: only when one runs)
    return kernels.ready(*(_as_pairs(x) for x in (q, k, v, *grad)))


def _kernel_warm(backward: bool):
    """``OpDef.warm`` of the forward (or the gradient, ``backward``): the compiled route's
    warm-up when ``_kernel_fits`` will take it at these static types (its run-time part,
    the compiled kernel, is what the warm-up makes ready)."""
    def warm(types: Any, attrs: Any) -> tuple:
        if len(types) != (5 if backward else 3):  # (a mask takes numpy's route)
            return ()
        q, k, v = types[:3]
        shapes = (q.shape, k.shape, v.shape)
        if q.dtype != np.float32 or any(len(x) < 2 or min(x) <= 0 for x in shapes) \
                or not q.shape[:-2] == k.shape[:-2] == v.shape[:-2] \
                or math.prod(q.shape[:-1]) * k.shape[-2] * q.shape[-1] < KERNEL_MIN_WORK:
            return ()
        from ..kernels import attention as kernels  # (imports Numba: plans are being built)
        return kernels.warmup(backward)
    return warm


def _as_pairs(x: np.ndarray) -> np.ndarray:
    """``x [..., length, features]`` as ``[batch, heads, length, features]`` with unit stride
    along features (a view when it can be: heads made by ``permute`` are not copied)."""
    if x.ndim != 4:
        x = x.reshape((1,) * (4 - x.ndim) + x.shape if x.ndim < 4 else (-1, *x.shape[-3:]))
    rows, features = x.strides[-2:]
    if features != x.itemsize or rows < x.shape[-1] * x.itemsize or not x.flags.aligned:
        x = np.ascontiguousarray(x)  # (rows must be GEMM rows: not broadcast, not reversed)
    return x


def _kernel(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float,
            causal: bool) -> np.ndarray:
    from ..kernels import attention as kernels
    out = kernels.attend(*(_as_pairs(x) for x in (q, k, v)), scale, causal)
    return out.reshape(*q.shape[:-1], v.shape[-1])


def _masked(scores: np.ndarray, hidden: np.ndarray, fits: bool) -> np.ndarray:
    """``scores`` with -inf where ``hidden`` (in place when the mask adds no dims)."""
    if fits:
        np.copyto(scores, -np.inf, where=hidden)
        return scores
    return np.where(hidden, -np.inf, scores)


def _probabilities(q: Any, k: Any, mask: Any, a: Any) -> Any:
    """``softmax(q k^T scale + mask)`` as table ops (the gradient's ``P``)."""
    e = q.shape[-1]
    if e < 0:
        raise OpError("scaled_dot_product_attention: its gradient needs the number of features "
                      "known when the graph is built")
    scores = op.matmul(q, k, transpose_y=True) * _default_scale(e, a.scale)
    if a.is_causal:
        keep = op.cast(op.tril(op.ones_like(scores)), dtype="bool")  # (rows: queries)
        scores = op.where(keep, scores, -np.inf)
    elif mask is not None:
        scores = op.where(mask, scores, -np.inf) if mask.dtype == np.bool_ else scores + mask
    return op.softmax(scores, dim=-1)


def _grad(ins: list, outs: list, gs: list, a: Any) -> list:
    """float32 without a mask: one blocked op (``scaled_dot_product_attention_grad``: never
    an ``L x S`` matrix per head, compiled; not differentiable again, as PyTorch's flash
    backward). Otherwise (float64, a mask) table ops, which hold ``P`` but differentiate
    again."""
    q, k, v = ins[:3]
    mask = ins[3] if len(ins) > 3 else None
    g = gs[0]
    if mask is None and q.dtype == np.float32:
        return list(op.scaled_dot_product_attention_grad(q, k, v, outs[0], g, **vars(a)))
    p = _probabilities(q, k, mask, a)
    p = op.where(op.isnan(p), 0.0, p)  # (a query that attends to nothing: no gradient)
    s = _default_scale(q.shape[-1], a.scale)
    dv = op.matmul(p, g, transpose_x=True)
    dp = op.matmul(g, v, transpose_y=True)
    ds = p * (dp - op.sum(dp * p, dims=(-1,), keep_dims=True))
    dq = op.matmul(ds, k) * s
    dk = op.matmul(ds, q, transpose_x=True) * s
    grads = [dq, dk, dv]
    if mask is not None:
        grads.append(ds if mask.dtype.kind == "f" else None)
    return grads


define("scaled_dot_product_attention", ["q", "k", "v", "mask?"], _infer, _sdpa,
       attrs={"is_causal": (Attr.BOOL, False), "scale": (Attr.OPT_FLOAT, None)},
       namespace="nn", grad=_grad, method=False, warm=_kernel_warm(False),
       doc="softmax(q @ k^T * scale + mask) @ v (PyTorch's layout: [..., L, E]); bool mask "
           "True = attend, float mask added; is_causal masks later keys; scale defaults to "
           "1/sqrt(E). Blocks of queries: never an L x S matrix per head going forward.")


def _backward_infer(types: list[TensorType], a: Any) -> list[TensorType]:
    q, k, v, out, g = types
    expected = _infer([q, k, v], a)
    for name, t in (("out", out), ("g", g)):
        if t.dtype != expected.dtype or len(t.shape) != len(expected.shape) or any(
                x >= 0 and y >= 0 and x != y for x, y in zip(t.shape, expected.shape)):
            raise OpError(f"scaled_dot_product_attention_grad: {name} must be the forward "
                          f"output's type {expected}, got {t}")
    return [q, k, v]


@forksafe.guarded
def _sdpa_backward(q: Any, k: Any, v: Any, out: Any, g: Any, *, is_causal: bool,
                   scale: float | None) -> tuple:
    q, k, v, out, g = (np.asarray(x) for x in (q, k, v, out, g))
    _backward_infer([TensorType(x.shape, x.dtype) for x in (q, k, v, out, g)],
                    SimpleNamespace(is_causal=is_causal, scale=scale))
    s = q.dtype.type(_default_scale(q.shape[-1], scale))
    if _kernel_fits(q, k, v, out, g):
        from ..kernels import attention as kernels
        got = kernels.attend_backward(*(_as_pairs(x) for x in (q, k, v, out, g)), float(s),
                                      is_causal)
        return tuple(d.reshape(x.shape) for d, x in zip(got, (q, k, v)))
    batch = out.shape[:-2]
    dq = np.empty(batch + q.shape[-2:], q.dtype)
    dk, dv = np.zeros(batch + k.shape[-2:], q.dtype), np.zeros(batch + v.shape[-2:], q.dtype)
    kt = np.swapaxes(k, -1, -2)
    for rows, seen in _blocks(q.shape[-2], k.shape[-2], is_causal):
        p, total = _exp_scores(q, kt, rows, seen, s, is_causal, None)
        p /= total
        g_b = g[..., rows, :]
        dv[..., seen, :] += np.matmul(np.swapaxes(p, -1, -2), g_b)
        ds = np.matmul(g_b, np.swapaxes(v[..., seen, :], -1, -2))  # dP, then dS in place
        ds -= (g_b * out[..., rows, :]).sum(axis=-1, keepdims=True)
        ds *= p
        ds *= s
        dq[..., rows, :] = np.matmul(ds, k[..., seen, :])
        dk[..., seen, :] += np.matmul(np.swapaxes(ds, -1, -2), q[..., rows, :])
    return tuple(sum_to_shape_of(d, x) for d, x in ((dq, q), (dk, k), (dv, v)))


def _no_second_order(ins: list, outs: list, gs: list, a: Any) -> list:
    raise GradientError("scaled_dot_product_attention_grad (the blocked gradient of float32 "
                        "attention without a mask) is not differentiable again: take second "
                        "derivatives in float64, where the gradient is written with table ops")


define("scaled_dot_product_attention_grad", ["q", "k", "v", "out", "g"], _backward_infer,
       _sdpa_backward, attrs={"is_causal": (Attr.BOOL, False), "scale": (Attr.OPT_FLOAT, None)},
       namespace="nn", grad=_no_second_order, method=False, multi_output=True,
       warm=_kernel_warm(True),
       doc="The gradients (dq, dk, dv) of scaled_dot_product_attention without a mask, from "
           "its inputs, its output and the output's gradient g; blocks of queries, scores "
           "recomputed: never an L x S matrix per head.")


# --- ND4J's feature-major form ------------------------------------------------------------------

def _swap_last(t: TensorType) -> TensorType:
    return TensorType((*t.shape[:-2], t.shape[-1], t.shape[-2]), t.dtype)


def _nd4j_mask_shape(rank: int, mask: tuple) -> tuple:
    """ND4J's key mask [batch, timesteps] placed for scores [batch, (heads,) queries, keys]."""
    return (mask[0], *([1] * (rank - 2)), mask[1])


def _dpa_attrs(scaled: bool) -> SimpleNamespace:
    return SimpleNamespace(is_causal=False, scale=None if scaled else 1.0)


def _dpa_infer(types: list[TensorType], a: Any) -> TensorType:
    q, k, v = types[:3]
    if len(q.shape) not in (3, 4):
        raise OpError(f"dot_product_attention: queries must be [batch, features, queries] or "
                      f"[batch, heads, features, queries], got {q}")
    inner = [_swap_last(t) for t in (q, k, v)]
    if len(types) > 3:
        m = types[3]
        if len(m.shape) != 2:
            raise OpError(f"dot_product_attention: the mask must be [batch, timesteps] (1: "
                          f"attend to that key), got {m}")
        inner.append(TensorType(_nd4j_mask_shape(len(q.shape), m.shape), np.dtype(bool)))
    return _swap_last(_infer(inner, _dpa_attrs(a.scaled)))


def _dpa(queries: Any, keys: Any, values: Any, mask: Any = None, *, scaled: bool) -> np.ndarray:
    q, k, v = (np.swapaxes(np.asarray(x), -1, -2) for x in (queries, keys, values))
    if mask is not None:
        mask = np.asarray(mask)
        if mask.ndim != 2:
            raise OpError(f"dot_product_attention: the mask must be [batch, timesteps], got "
                          f"shape {mask.shape}")
        mask = (mask != 0).reshape(_nd4j_mask_shape(q.ndim, mask.shape))
    a = _dpa_attrs(scaled)
    return np.swapaxes(_sdpa(q, k, v, mask, is_causal=a.is_causal, scale=a.scale), -1, -2)


def _dpa_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    rank = len(ins[0].shape)
    swap = (*range(rank - 2), rank - 1, rank - 2)
    inner = [op.permute(x, dims=swap) for x in ins[:3]]
    if len(ins) > 3:
        m = op.neq(ins[3], 0.0)
        for _ in range(rank - 2):
            m = op.expand_dims(m, axis=1)
        inner.append(m)
    out = [op.permute(outs[0], dims=swap)]  # (the forward's output: the blocked gradient's)
    grads = _grad(inner, out, [op.permute(gs[0], dims=swap)], _dpa_attrs(a.scaled))
    return [op.permute(g, dims=swap) for g in grads[:3]] + [None] * (len(ins) - 3)


define("dot_product_attention", ["queries", "keys", "values", "mask?"], _dpa_infer, _dpa,
       attrs={"scaled": (Attr.BOOL, True)}, namespace="nn", grad=_dpa_grad, method=False,
       doc="ND4J's dotProductAttention: feature-major [batch, (heads,) features, timesteps] "
           "queries/keys/values, a [batch, timesteps] key mask (non-zero: attend), scaled by "
           "1/sqrt(features) when ``scaled``; gives [batch, (heads,) featuresV, queries].")


# --- ND4J's multi-head form -------------------------------------------------------------------

def _mha_infer(types: list[TensorType], a: Any) -> TensorType:
    q, k, v, wq, wk, wv, wo = types[:7]
    for name, t in (("queries", q), ("keys", k), ("values", v)):
        if len(t.shape) != 3:
            raise OpError(f"multi_head_dot_product_attention: {name} must be [batch, nIn, "
                          f"timesteps], got {t}")
    for name, t in (("Wq", wq), ("Wk", wk), ("Wv", wv)):
        if len(t.shape) != 3:
            raise OpError(f"multi_head_dot_product_attention: {name} must be [heads, "
                          f"projected, nIn], got {t}")
    heads, pv = wv.shape[0], wv.shape[1]
    if len(wo.shape) != 2 or (heads >= 0 and pv >= 0 and wo.shape[0] >= 0
                              and wo.shape[0] != heads * pv):
        raise OpError(f"multi_head_dot_product_attention: Wo must be [heads * projectedValues "
                      f"({heads} * {pv}), nOut], got {wo}")
    projected = [TensorType((q.shape[0], wq.shape[0], wq.shape[1], q.shape[2]), q.dtype),
                 TensorType((k.shape[0], wk.shape[0], wk.shape[1], k.shape[2]), k.dtype),
                 TensorType((v.shape[0], heads, pv, v.shape[2]), v.dtype)]
    _dpa_infer(projected + list(types[7:]), a)
    return TensorType((q.shape[0], wo.shape[1], q.shape[2]), q.dtype)


def _mha(queries: Any, keys: Any, values: Any, wq: Any, wk: Any, wv: Any, wo: Any,
         mask: Any = None, *, scaled: bool) -> np.ndarray:
    x = [np.asarray(a) for a in (queries, keys, values, wq, wk, wv, wo)]
    _mha_infer([TensorType(a.shape, a.dtype) for a in x]
               + ([TensorType(np.shape(mask), np.asarray(mask).dtype)] if mask is not None
                  else []), SimpleNamespace(scaled=scaled))
    q, k, v, wq, wk, wv, wo = x
    project = (lambda w, a: np.matmul(w[None], a[:, None]))  # [b, heads, projected, T]
    att = _dpa(project(wq, q), project(wk, k), project(wv, v), mask, scaled=scaled)
    heads, pv = wv.shape[0], wv.shape[1]
    wo4 = wo.reshape(heads, pv, wo.shape[1])
    return np.matmul(np.swapaxes(wo4, -1, -2)[None], att).sum(axis=1)  # [b, nOut, Tq]


def _mha_grad(ins: list, outs: list, gs: list, a: Any) -> list:
    """The projections and the attention recomputed with table ops, then the chain rule by
    hand: each projection ``P = W x`` (per head) gives ``dW = sum_b dP x^T`` and
    ``dx = sum_heads W^T dP``; the output ``sum_heads Wo_h^T A_h`` gives ``dWo_h = sum_b A_h
    g^T`` and ``dA_h = Wo_h g``."""
    q, k, v, wq, wk, wv, wo = ins[:7]
    mask = ins[7:]
    g = gs[0]
    heads, pv = wv.shape[0], wv.shape[1]
    if heads < 0 or pv < 0:
        raise OpError("multi_head_dot_product_attention: its gradient needs Wv's shape known "
                      "when the graph is built")
    project = (lambda w, x: op.matmul(op.expand_dims(w, axis=0), op.expand_dims(x, axis=1)))
    proj = [project(wq, q), project(wk, k), project(wv, v)]
    att = op.dot_product_attention(*proj, *mask, scaled=a.scaled)  # [b, heads, pv, Tq]
    wo4 = op.reshape(wo, shape=(heads, pv, wo.shape[1]))
    g4 = op.expand_dims(g, axis=1)  # [b, 1, nOut, Tq]
    d_wo = op.reshape(op.sum(op.matmul(att, g4, transpose_y=True), dims=(0,)),
                      shape=tuple(wo.shape))
    d_att = op.matmul(op.expand_dims(wo4, axis=0), g4)  # [b, heads, pv, Tq]
    d_proj = _dpa_grad([*proj, *mask], [att], [d_att], a)[:3]
    grads_x, grads_w = [], []
    for w, x, dp in zip((wq, wk, wv), (q, k, v), d_proj):
        grads_w.append(op.sum(op.matmul(dp, op.expand_dims(x, axis=1), transpose_y=True),
                              dims=(0,)))
        grads_x.append(op.sum(op.matmul(op.expand_dims(w, axis=0), dp, transpose_x=True),
                              dims=(1,)))
    return [*grads_x, *grads_w, d_wo] + [None] * len(mask)


define("multi_head_dot_product_attention",
       ["queries", "keys", "values", "Wq", "Wk", "Wv", "Wo", "mask?"], _mha_infer, _mha,
       attrs={"scaled": (Attr.BOOL, True)}, namespace="nn", grad=_mha_grad, method=False,
       doc="ND4J's multiHeadDotProductAttention: [batch, nIn, T] queries/keys/values projected "
           "per head by Wq/Wk [heads, projectedKeys, nIn] and Wv [heads, projectedValues, nIn], "
           "dotProductAttention per head, heads concatenated and projected by Wo [heads * "
           "projectedValues, nOut]; gives [batch, nOut, Tq].")
