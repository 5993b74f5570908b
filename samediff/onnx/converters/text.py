"""ONNX converters, text family: TfIdfVectorizer over integer or string tokens.

The n-gram pool is an attribute, so every count is a fixed pattern match: for each n-gram
length ``n`` and skip distance ``d`` (``d`` = 1 only for unigrams, which skips do not change),
the windows ``x[..., i + j*d]`` (``j < n``) of every start ``i`` are gathered at static
indices, compared with every pool n-gram of that length, and the full matches summed over
starts; a constant 0/1 matrix then adds each n-gram's count into its output column
(``ngram_indexes``). All of it is table ops (``gather``, ``eq``, ``all``, ``sum``, ``matmul``),
so it traces and compiles like the rest of a model. A pool of strings (``pool_strings``)
matches UTF8 tokens the same way: ``gather`` and ``eq`` take text.
"""
from __future__ import annotations

import numpy as np

from ..table import converter

_F32 = np.dtype(np.float32)


def _pool_grams(node, pool: list) -> list[tuple[int, tuple]]:
    """The pool's n-grams in order, as (n, tokens): ngram_counts[k] is where the (k+1)-grams
    start in the pool."""
    starts = [int(v) for v in node.attr("ngram_counts", [])]
    grams = []
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(pool)
        n = k + 1
        if end < start or (end - start) % n:
            raise node.fail(f"ngram_counts {starts} does not split the pool of {len(pool)} "
                            f"tokens into whole {n}-grams")
        grams += [(n, tuple(pool[p:p + n])) for p in range(start, end, n)]
    return grams


@converter("TfIdfVectorizer", since=9)
def _tfidf_vectorizer(node):
    strings = node.attr("pool_strings")
    if strings and node.attr("pool_int64s"):
        raise node.fail("give pool_strings or pool_int64s, not both")
    x = node.input(0)
    shape = node.shape(x)
    text = node.dtype(x).kind == "T"
    if bool(strings) != text:
        raise node.fail(f"a pool of {'strings' if strings else 'integers'} needs "
                        f"{'string' if strings else 'integer'} tokens, got {node.dtype(x)}")
    if node.rank(x) not in (1, 2) or shape[-1] < 0:
        raise node.fail(f"the input must be [C] or [N, C] with C known at import, got "
                        f"{list(shape)}")
    pool = ([str(v.decode() if isinstance(v, bytes) else v) for v in strings] if text
            else [int(v) for v in node.attr("pool_int64s", [])])
    grams = _pool_grams(node, pool)
    indexes = [int(v) for v in node.attr("ngram_indexes", [])]
    if len(indexes) != len(grams):
        raise node.fail(f"ngram_indexes has {len(indexes)} entries for {len(grams)} pool "
                        f"n-grams")
    mode = node.attr("mode", "TF")
    if mode not in ("TF", "IDF", "TFIDF"):
        raise node.fail(f"mode {mode!r} is not one of TF, IDF, TFIDF")
    lo, hi = int(node.attr("min_gram_length", 1)), int(node.attr("max_gram_length", 1))
    skips = int(node.attr("max_skip_count", 0))
    width = max(indexes) + 1 if indexes else 0
    tokens = x if text else node.op("cast", x, dtype=np.int64)
    token_type = node.dtype(x) if text else np.dtype(np.int64)
    c = shape[-1]
    total = None
    for n in range(max(lo, 1), hi + 1):
        mine = [(k, g) for k, (m, g) in enumerate(grams) if m == n]
        if not mine:
            continue
        pattern = np.array([g for _, g in mine], token_type)  # [G, n]
        to_columns = np.zeros((len(mine), width), _F32)
        for row, (k, _) in enumerate(mine):
            to_columns[row, indexes[k]] = 1.0
        for d in range(1, skips + 2) if n > 1 else (1,):
            starts = [i for i in range(c) if i + d * (n - 1) < c]
            if not starts:
                continue
            at = np.array([[i + j * d for j in range(n)] for i in starts], np.int64)
            windows = node.op("gather", tokens, at, axis=-1)  # [..., P, n]
            same = node.op("eq", node.op("expand_dims", windows, axis=-2), pattern)
            found = node.op("all", same, dims=(-1,))  # [..., P, G]
            counts = node.op("sum", node.op("cast", found, dtype=_F32), dims=(-2,))
            part = node.op("matmul", counts, to_columns)
            total = part if total is None else node.op("add", total, part)
    if total is None:  # (no n-gram of a counted length in the pool)
        total = np.zeros(tuple(shape[:-1]) + (width,), _F32)
        if shape[:-1] and shape[0] < 0:
            raise node.fail("an empty count over a run-time batch is not supported")
    weights = node.attr("weights")
    w = np.ones(width, _F32) if weights is None else np.asarray(weights, _F32)
    if mode == "TF":
        return total
    if mode == "IDF":
        return node.op("mul", node.op("minimum", total, np.ones((), _F32)), w)
    return node.op("mul", total, w)
