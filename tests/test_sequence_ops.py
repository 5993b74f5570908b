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
