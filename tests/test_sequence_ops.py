"""The sequence-model ops' behaviours a table row cannot express: ``embedding``'s gradient
(repeated ids accumulate, the padding row learns nothing, as PyTorch), its named errors, and
``rms_norm`` against its definition and through the ND4J-style front end."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff
from samediff.errors import OpError, OpIndexError

RNG = np.random.default_rng(37)


def _table_gradient(ids, padding_idx=None):
    sd = SameDiff.create()
    w = sd.var("w", RNG.normal(size=(5, 3)))
    out = sd.nn.embedding(sd.constant("ids", ids), w, padding_idx=padding_idx)
    (out * sd.constant("g", np.ones((*ids.shape, 3)))).sum().mark_as_loss()
    return sd.calculate_gradients({}, "w")["w"].numpy()


def test_repeated_ids_accumulate_and_the_padding_row_learns_nothing():
    ids = np.array([[3, 0, 3], [1, 4, 3]])
    counts = np.bincount(ids.ravel(), minlength=5)[:, None] * np.ones(3)
    np.testing.assert_array_equal(_table_gradient(ids), counts)
    padded = counts.copy()
    padded[3] = 0.0
    np.testing.assert_array_equal(_table_gradient(ids, padding_idx=3), padded)
    np.testing.assert_array_equal(_table_gradient(ids, padding_idx=-2), padded)  # 5 - 2 = 3


def test_embedding_errors_are_named():
    w = nd.create(RNG.normal(size=(4, 2)))
    with pytest.raises(OpIndexError, match=r"embedding: ids must be in \[0, 4\)"):
        nd.nn.embedding(nd.create(np.array([0, 4])), w)
    with pytest.raises(OpIndexError, match="from -1"):
        nd.nn.embedding(nd.create(np.array([-1, 2])), w)
    with pytest.raises(OpError, match="ids must be integers"):
        nd.nn.embedding(nd.create(np.array([0.0, 1.0])), w)
    with pytest.raises(OpError, match="padding_idx=4 is outside"):
        nd.nn.embedding(nd.create(np.array([0, 1])), w, padding_idx=4)
    with pytest.raises(OpError, match=r"\[num_embeddings, dim\]"):
        nd.nn.embedding(nd.create(np.array([0])), nd.create(np.ones(3)))


def test_embedding_is_a_lookup_traced_and_compiled():
    w = RNG.normal(size=(6, 4)).astype(np.float32)
    ids = np.array([[5, 0], [2, 2]])
    f = nd.compile(lambda i, t: nd.nn.embedding(i, t))
    np.testing.assert_array_equal(f(nd.create(ids), nd.create(w)).numpy(), w[ids])


def test_rms_norm_matches_its_definition_and_the_nd4j_spelling():
    x = RNG.normal(size=(3, 8)).astype(np.float32)
    gain = RNG.normal(size=8).astype(np.float32)
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * gain
    got = nd.nn.rms_norm(nd.create(x), nd.create(gain)).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-6)
    sd = SameDiff.create()
    y = sd.nn.rmsNorm(sd.constant("x", x), sd.constant("g", gain))
    np.testing.assert_array_equal(y.eval().numpy(), got)


def test_attention_never_holds_a_full_score_matrix_going_forward():
    """Seq 1,024, 2 heads, float64: the scores of one head alone would be 8 MiB; the forward
    pass holds one block of queries' scores at a time (2 MiB for both heads; measured peak
    4.3 MiB with the other temporaries, under one head's full matrix)."""
    import tracemalloc
    q, k, v = (nd.create(RNG.normal(size=(2, 1024, 16))) for _ in range(3))
    tracemalloc.start()
    try:
        out = nd.nn.scaled_dot_product_attention(q, k, v, is_causal=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.shape == (2, 1024, 16)
    assert peak < 6 << 20, f"peak {peak / 2 ** 20:.1f} MiB"


@pytest.mark.parametrize("length, keys", [(300, 300), (300, 170), (170, 300)])
def test_causal_attention_over_several_blocks_skips_only_hidden_keys(length, keys):
    """Causal blocks read only the keys their queries see (query i: keys j <= i, PyTorch's
    top-left alignment when the lengths differ); compared with the full masked softmax."""
    q, k, v = (RNG.normal(size=(2, n, 8)) for n in (length, keys, keys))
    got = nd.nn.scaled_dot_product_attention(nd.create(q), nd.create(k), nd.create(v),
                                             is_causal=True).numpy()
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(8)
    scores = np.where(np.arange(keys)[None, :] <= np.arange(length)[:, None], scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    want = (weights / weights.sum(-1, keepdims=True)) @ v
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_attention_masks_and_errors():
    q, k, v = (nd.create(RNG.normal(size=shape)) for shape in ((3, 4), (4, 4), (4, 2)))
    nothing = nd.create(np.array([[True] * 4, [False] * 4, [True] * 4]))
    out = nd.nn.scaled_dot_product_attention(q, k, v, nothing).numpy()
    assert np.isnan(out[1]).all() and not np.isnan(out[[0, 2]]).any()  # (PyTorch's: NaN)
    with pytest.raises(OpError, match="not both"):
        nd.nn.scaled_dot_product_attention(q, k, v, nothing, is_causal=True)
    with pytest.raises(OpError, match="features per position"):
        nd.nn.scaled_dot_product_attention(q, nd.create(np.ones((4, 5))), v)
    with pytest.raises(OpError, match="bool .* or float"):
        nd.nn.scaled_dot_product_attention(q, k, v, nd.create(np.ones((3, 4), np.int64)))


def test_nd4j_dot_product_attention_is_feature_major_attention():
    """ND4J's ``dotProductAttention(queries, keys, values, mask, scaled)``: [batch, features,
    timesteps] in and out, a [batch, timesteps] key mask — the same numbers as PyTorch-layout
    attention on the swapped arrays."""
    q, k, v = (RNG.normal(size=s) for s in ((2, 4, 3), (2, 4, 5), (2, 6, 5)))
    mask = np.array([[1, 1, 0, 1, 0], [0, 1, 1, 1, 1]])
    sd = SameDiff.create()
    args = [sd.constant(n, a) for n, a in zip("qkvm", (q, k, v, mask))]
    out = sd.nn.dotProductAttention(*args, True).eval().numpy()
    swap = (lambda a: nd.create(np.swapaxes(a, -1, -2)))
    want = nd.nn.scaled_dot_product_attention(swap(q), swap(k), swap(v),
                                              nd.create((mask != 0)[:, None, :])).numpy()
    assert out.shape == (2, 6, 3)
    np.testing.assert_allclose(out, np.swapaxes(want, -1, -2), rtol=1e-12)
