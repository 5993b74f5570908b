"""Compiled attention forward: ``softmax(q k^T scale) v`` per (batch, head), blocks of queries.

``ops/attention.py``'s numpy route spends most of its time outside the two products: at
seq 2,048 the softmax's ``max``/``exp``/``sum`` passes over each block's scores cost more
than both GEMMs together, and each runs on one core. Here one Numba call runs a range of
(batch, head) pairs. Per pair, ``k^T * scale`` into a scratch ``[E, S]`` (one pass over the
keys; a GEMM with a row-major right operand ran 1.3x faster than with the transposed ``k``),
then per block of ``block`` queries:

1. one GEMM on the private BLAS: scores ``[block, seen]`` = the block's queries times
   ``(k^T * scale)[:, :seen]``, where ``seen`` is every key, or with ``causal`` only the
   keys up to the block's last query;
2. three vectorized passes per row: its max, the exps in place (in base 2: ``log2(e)`` is
   folded into the scale, so each is ``fastmath.exp2_nonpos_f32``), and their sum; with
   ``causal`` the keys after the row's query are set to 0 instead;
3. one GEMM: ``P [block, seen] @ v[:seen]`` into the output rows, then each row divided by
   its sum (a pass over ``[block, Ev]`` instead of ``[block, S]``).

At no time is there more than a block's scores (O(block * S) per thread): never a head's
``L x S``. The caller splits the pairs over two threads (``workers.on_halves``). Operands are
4-D ``[batch, heads, length, features]`` with unit stride along features (the rest any
strides), so heads made by ``reshape``/``permute`` are read in place, not copied.

The row passes (exp, sum, divide, the scores' gradient) prefer 512-bit vectors
(``vector_width.wide_vectors``): a block's softmax rows at 2,048 keys take 0.84x their time
at LLVM's default 256 bits for these cores, the row division 0.85x.

float32 only (the exp is a float32 polynomial); float64 and masks take the numpy route.
"""
from __future__ import annotations

import numba
import numpy as np

from . import compiling, spin, variants, workers
from .blas import available, gemm
from .fastmath import KERNEL_FASTMATH, exp2_nonpos_f32, row_max
from .jit_options import PYTHON_CALLERS, compiled_only
from .vector_width import wide_vectors

#: queries per block at most (scores of a block: block x S float32 per thread), and at least
BLOCK, MIN_BLOCK = 128, 32


def block_for(length: int) -> int:
    """Queries per block for ``length`` queries: a sixteenth of them, from ``MIN_BLOCK`` to
    ``BLOCK``. A causal block computes the scores of its whole square on the diagonal, half of
    them hidden: at seq 128 blocks of 128 did twice the work needed, and blocks of 32 took
    0.61x the time forward and 0.58x backward (one thread, 8 x 4 heads, E 64); at seq 256,
    0.62x / 0.81x. Smaller blocks make smaller GEMMs: at seq 2,048 blocks of 32 took 1.07x
    (causal) and 1.14x (full) the time of blocks of 128, and 64 was as fast as 128 at 1,024.

    >>> block_for(128), block_for(1024), block_for(4096)
    (32, 64, 128)
    """
    return min(BLOCK, max(MIN_BLOCK, length // 16))

LOG2_E = 1.4426950408889634
_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)
_FAST = set(KERNEL_FASTMATH)


# Three loops per row, each written so that LLVM vectorizes it: a fused loop (max, then exp
# and sum) ran 5.7 ns per score, scalar; these three ~0.8 ns together (``row_max``: eight
# independent maxima, see ``fastmath``).

@compiled_only(cache=True, nogil=True, fastmath=_FAST)
def _row_exp(row, n, top):
    wide_vectors()
    for j in range(n):
        row[j] = exp2_nonpos_f32(row[j] - top)
    for j in range(n, row.shape[0]):
        row[j] = _ZERO


@compiled_only(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _row_sum(row, n):
    wide_vectors()
    total = _ZERO
    for j in range(n):
        total += row[j]
    return total


@compiled_only(cache=True, nogil=True)
def _softmax_rows(scores, first, causal, sums):
    """Each row of ``scores`` (query ``first + r``) to ``exp(s - max)`` in place, its sum in
    ``sums[r]``; with ``causal`` the row sees keys ``<= first + r`` and the rest become 0."""
    cols = scores.shape[1]
    for r in range(scores.shape[0]):
        row = scores[r]
        n = min(first + r + 1, cols) if causal else cols
        _row_exp(row, n, row_max(row, n))
        sums[r] = _row_sum(row, n)


@numba.njit(cache=True, nogil=True, fastmath=_FAST, **PYTHON_CALLERS)
def _transpose_scaled(src, scale, dst):
    """``dst = src.T * scale`` in 8 x 8 tiles (each side's cache lines read or written whole).
    Whole tiles have constant trip counts, so LLVM unrolls them: 2.4x faster than tiles
    bounded by ``min`` at the edges (2,048 x 64: 250 -> 100 us); the ragged edges after."""
    wide_vectors()
    n, m = src.shape
    n8, m8 = n - n % 8, m - m % 8
    for i0 in range(0, n8, 8):
        for e0 in range(0, m8, 8):
            for e in range(8):
                for i in range(8):
                    dst[e0 + e, i0 + i] = src[i0 + i, e0 + e] * scale
        for e in range(m8, m):
            for i in range(i0, i0 + 8):
                dst[e, i] = src[i, e] * scale
    for i in range(n8, n):
        for e in range(m):
            dst[e, i] = src[i, e] * scale


@compiled_only(cache=True, nogil=True, fastmath=_FAST)
def _divide_rows(out, sums):
    """Row ``r`` of ``out`` divided by ``sums[r]`` in place (the output's rows, or the
    probabilities')."""
    wide_vectors()
    for r in range(out.shape[0]):
        inv = _ONE / sums[r]
        for e in range(out.shape[1]):
            out[r, e] *= inv


@compiled_only(cache=True, nogil=True)
def _exp_scores(q_b, kt, start, seen, causal, scratch, sums):
    """The block of queries ``q_b`` (the first is query ``start``) against the first ``seen``
    keys of ``kt`` (``k^T`` times the base-2 scale): ``2**(score - row max)``, hidden keys 0,
    as a C-contiguous ``[rows, seen]`` view of ``scratch`` (the row loops vectorize only over
    those), the row sums in ``sums``."""
    part = scratch[:q_b.shape[0] * seen].reshape((q_b.shape[0], seen))
    gemm(q_b, kt[:, :seen], part, 0.0)
    _softmax_rows(part, start, causal, sums)
    return part


def _forward_py(q, k, v, scale, causal, lo, hi, block, out, go):
    """``out[b, :, h] = softmax(q[b, h] k[b, h]^T s (causal)) v[b, h]`` (``out``: [batch,
    length, heads, e]) for the flattened pairs ``lo <= b * heads + h < hi``, where ``scale =
    s * log2(e)``: the scores are in base 2, so each exp is a ``2**v`` (``exp2_nonpos_f32``,
    cheaper than ``exp``; ``attend`` passes it).
    ``go``: ``workers.both``'s token, announced at once."""
    spin.announce(go)
    heads, length, keys = q.shape[1], q.shape[2], k.shape[2]
    scores = np.empty(block * keys, np.float32)
    sums = np.empty(block, np.float32)
    kt = np.empty((q.shape[3], keys), np.float32)
    for pair in range(lo, hi):
        b, h = pair // heads, pair % heads
        _transpose_scaled(k[b, h], scale, kt)
        for start in range(0, length, block):
            stop = min(start + block, length)
            seen = min(stop, keys) if causal else keys
            part = _exp_scores(q[b, h, start:stop], kt, start, seen, causal, scores, sums)
            dst = out[b, start:stop, h]
            gemm(part, v[b, h, :seen], dst, 0.0)
            _divide_rows(dst, sums)


@compiled_only(cache=True, nogil=True, fastmath=_FAST)
def _score_gradient(p, dp, o, g, scale):
    """``dp = p * (dp - rowsum(g * o)) * scale`` in place: the scores' gradient from the
    probabilities' (``rowsum(g * o)`` is ``rowsum(p * dp)``: the output's rows, E values each
    instead of S)."""
    wide_vectors()
    for r in range(p.shape[0]):
        d = _ZERO
        for e in range(o.shape[1]):
            d += g[r, e] * o[r, e]
        for j in range(p.shape[1]):
            dp[r, j] = p[r, j] * (dp[r, j] - d) * scale


def _backward_py(q, k, v, o, g, scale2, scale, causal, lo, hi, block, dq, dk, dv, go):
    """The gradients ``dq``, ``dk``, ``dv`` (zeroed by the caller) of ``forward`` for the
    pairs ``lo <= b * heads + h < hi``, from its output ``o`` and the output's gradient
    ``g``, a block of queries at a time (scores recomputed, never a head's ``L x S``):

        P = softmax(Q_b K^T s)      dV += P^T G_b       dP = G_b V^T
        dS = P * (dP - rowsum(G_b * O_b)) * s          dQ_b = dS K      dK += dS^T Q_b

    ``scale2 = s * log2(e)`` as ``forward``'s, ``scale`` is ``s``. ``go``: ``workers.both``'s
    token, announced at once."""
    spin.announce(go)
    heads, length, keys = q.shape[1], q.shape[2], k.shape[2]
    probs = np.empty(block * keys, np.float32)
    grads = np.empty(block * keys, np.float32)
    sums = np.empty(block, np.float32)
    kt = np.empty((q.shape[3], keys), np.float32)
    for pair in range(lo, hi):
        b, h = pair // heads, pair % heads
        _transpose_scaled(k[b, h], scale2, kt)
        for start in range(0, length, block):
            stop = min(start + block, length)
            seen = min(stop, keys) if causal else keys
            q_b, g_b = q[b, h, start:stop], g[b, h, start:stop]
            p = _exp_scores(q_b, kt, start, seen, causal, probs, sums)
            _divide_rows(p, sums)
            dp = grads[:p.size].reshape(p.shape)
            gemm(p.T, g_b, dv[b, h, :seen], 1.0)
            gemm(g_b, v[b, h, :seen].T, dp, 0.0)
            _score_gradient(p, dp, o[b, h, start:stop], g_b, scale)
            gemm(dp, k[b, h, :seen], dq[b, h, start:stop], 0.0)
            gemm(dp.T, q_b, dk[b, h, :seen], 1.0)


_IN = variants.array(numba.float32, 4, True)   # read: any layout, read-only or not
_OUT = variants.array(numba.float32, 4)
_F32, _I64 = numba.float32, numba.int64

#: compiled once (float32) for operands of any layout: heads made by ``permute`` are strided
#: views, others contiguous, and a variant per layout compiled ~2 s each way; a warm-up key
#: known from static types lets a plan's compile helper take them ahead (``ops/attention``)
forward = variants.PerDtype(_forward_py, lambda dt: (
    _IN, _IN, _IN, _F32, numba.boolean, _I64, _I64, _I64, _OUT, variants.GO))
backward = variants.PerDtype(_backward_py, lambda dt: (
    _IN, _IN, _IN, _IN, _IN, _F32, _F32, numba.boolean, _I64, _I64, _I64, _OUT, _OUT, _OUT,
    variants.GO))
_KEY, _KEY_BACKWARD = ("attention", np.dtype(np.float32)), ("attention_backward",
                                                             np.dtype(np.float32))


def _warm(key: tuple) -> None:
    """Compile (or load) ``forward`` (``key``: ``("attention", float32)``)."""
    if available():
        forward[np.dtype(np.float32)]


def _warm_backward(key: tuple) -> None:
    """Compile (or load) ``backward`` (``key``: ``("attention_backward", float32)``)."""
    if available():
        backward[np.dtype(np.float32)]


def warmup(backward: bool) -> tuple:
    """The warm-up (module, function, key) of the compiled forward (or ``backward``): an
    attention op's ``OpDef.warm`` on the compiled route; none without the private BLAS."""
    if not available():
        return ()
    name, key = (("_warm_backward", _KEY_BACKWARD) if backward else ("_warm", _KEY))
    return ((__name__, name, (key[0], key[1].name)),)


#: multiply-adds (L * S * E summed over pairs) from which the pairs go to two threads
SPLIT_MIN_WORK = 1 << 20


def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float,
           causal: bool) -> np.ndarray:
    """``softmax(q k^T scale) v`` of 4-D float32 ``[batch, heads, length, features]``
    operands sharing batch and heads, each with unit stride along features; the pairs split
    over two threads (``workers``) from ``SPLIT_MIN_WORK``. Call once ``ready`` says so."""
    batch, heads, length = q.shape[:3]
    # written as [batch, length, heads, e] (FlashAttention's layout), returned as its
    # [batch, heads, length, e] view: a transformer merges the heads next (permute 0, 2, 1, 3
    # and reshape to [batch, length, heads * e]), which is then a view instead of a copy
    out = np.empty((batch, length, heads, v.shape[3]), np.float32)
    pairs = batch * heads
    work = pairs * length * k.shape[2] * (q.shape[3] + v.shape[3]) // (2 if causal else 1)
    parts = workers.halves(pairs, work, SPLIT_MIN_WORK)
    s = np.float32(scale * LOG2_E)  # (scores in base 2: see ``forward``)
    run = forward[np.dtype(np.float32)]
    workers.on_halves(parts, lambda part, go: run(
        q, k, v, s, causal, part.start, part.stop, block_for(length), out, go))
    return out.transpose(0, 2, 1, 3)


def attend_backward(q: np.ndarray, k: np.ndarray, v: np.ndarray, o: np.ndarray,
                    g: np.ndarray, scale: float, causal: bool) -> tuple:
    """``attend``'s gradients ``(dq, dk, dv)`` from its output ``o`` and the output's
    gradient ``g`` (operands as ``attend``'s), the pairs split over two threads. Call once
    ``ready_backward`` says so."""
    batch, heads, length = q.shape[:3]
    dq = np.empty(q.shape, np.float32)
    dk, dv = np.zeros(k.shape, np.float32), np.zeros(v.shape, np.float32)
    pairs = batch * heads
    work = 2 * pairs * length * k.shape[2] * (q.shape[3] + v.shape[3]) // (2 if causal else 1)
    parts = workers.halves(pairs, work, SPLIT_MIN_WORK)
    s2, s = np.float32(scale * LOG2_E), np.float32(scale)
    run = backward[np.dtype(np.float32)]
    workers.on_halves(parts, lambda part, go: run(
        q, k, v, o, g, s2, s, causal, part.start, part.stop, block_for(length), dq, dk, dv,
        go))
    return dq, dk, dv


def scratch_bytes(e: int, keys: int, block: int = BLOCK) -> int:
    """Bytes ``forward`` allocates per thread (Numba's allocator: ``tracemalloc`` does not
    see them): a block's scores, their row sums, one head's scaled ``k^T`` (``block``:
    ``block_for`` the number of queries)."""
    return 4 * (block * keys + block + e * keys)


def ready(*operands: np.ndarray) -> bool:
    """May ``forward`` (3 operands: q, k, v) or ``backward`` (5: q, k, v, o, g) run now: the
    private BLAS loaded and the function compiled (``compiling.ready``; one variant serves
    every layout)?"""
    if len(operands) == 3:
        return available() and compiling.ready(_KEY, _warm)
    return available() and compiling.ready(_KEY_BACKWARD, _warm_backward)
