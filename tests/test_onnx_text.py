"""TfIdfVectorizer over integer and string tokens (samediff/onnx/converters/text.py) against
onnx.reference, across modes, n-gram lengths (up to 3), skips, weights and batch forms --
random token streams so that n-grams repeat -- compiled and interpreted."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from samediff import compiler  # noqa: E402
from samediff.onnx import OnnxImportError  # noqa: E402
from samediff.onnx.backend import run  # noqa: E402

POOL = dict(ngram_counts=[0, 4, 10], pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 5, 6, 7],
            ngram_indexes=[0, 1, 2, 3, 4, 5, 6, 7])


def _model(shape, **attrs):
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.INT64, shape)], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                        None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("mode,weights", [("TF", None), ("IDF", None), ("TFIDF", None),
                                          ("TFIDF", [0.5, 1, 2, 3, 4, 5, 6, 7])])
@pytest.mark.parametrize("lo,hi,skips", [(1, 1, 3), (1, 2, 0), (2, 2, 2), (1, 3, 3), (3, 3, 1)])
@pytest.mark.parametrize("shape", [(30,), (3, 12)])
def test_tfidf_matches_the_reference(mode, weights, lo, hi, skips, shape):
    attrs = dict(POOL, mode=mode, min_gram_length=lo, max_gram_length=hi, max_skip_count=skips)
    if weights is not None:
        attrs["weights"] = weights
    model = _model(list(shape), **attrs)
    x = np.random.default_rng(sum(shape) + skips).integers(2, 9, shape).astype(np.int64)
    # (the reference fails on IDF/TFIDF without weights; the spec's default is all ones)
    reference = model if weights or mode == "TF" else _model(list(shape), **attrs,
                                                              weights=[1.0] * 8)
    want = ReferenceEvaluator(reference).run(None, {"x": x})[0]
    executor = "compiled" if shape == (3, 12) and skips == 3 else "interpreter"
    previous = compiler.set_executor(executor)
    try:
        got = run(model, [x])[0]
    finally:
        compiler.set_executor(previous)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def _string_model(shape, **attrs):
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.STRING, shape)], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


#: the integer pool's n-grams as words (an sklearn pipeline's tokens are strings)
WORDS = {2: "the", 3: "cat", 4: "sat", 5: "on", 6: "a", 7: "mat", 8: "today"}
STRING_POOL = dict(ngram_counts=POOL["ngram_counts"], ngram_indexes=POOL["ngram_indexes"],
                   pool_strings=[WORDS[t] for t in POOL["pool_int64s"]])


@pytest.mark.parametrize("mode,lo,hi,skips,shape", [("TF", 1, 2, 1, (20,)),
                                                    ("TFIDF", 1, 3, 2, (3, 10))])
def test_string_pools_count_as_the_same_integer_pool(mode, lo, hi, skips, shape):
    """Words in place of integer tokens give the integer pool's counts; and the reference's."""
    attrs = dict(mode=mode, min_gram_length=lo, max_gram_length=hi, max_skip_count=skips,
                 weights=[0.5, 1, 2, 3, 4, 5, 6, 7])
    ints = np.random.default_rng(len(shape) + skips).integers(2, 9, shape).astype(np.int64)
    words = np.vectorize(WORDS.get, otypes=[object])(ints)
    want = ReferenceEvaluator(_model(list(shape), **POOL, **attrs)).run(None, {"x": ints})[0]
    reference = ReferenceEvaluator(_string_model(list(shape), **STRING_POOL, **attrs))
    np.testing.assert_array_equal(reference.run(None, {"x": words})[0], want)
    previous = compiler.set_executor("compiled" if len(shape) == 2 else "interpreter")
    try:
        got = run(_string_model(list(shape), **STRING_POOL, **attrs), [words])[0]
    finally:
        compiler.set_executor(previous)
    np.testing.assert_array_equal(got, want)


def test_a_pool_and_tokens_of_different_kinds_are_named():
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="TF", min_gram_length=1,
                            max_gram_length=1, max_skip_count=0, ngram_counts=[0],
                            ngram_indexes=[0], pool_strings=["a"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.INT64, [4])], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                      None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OnnxImportError, match="TfIdfVectorizer.*pool of strings needs string"):
        run(model, [np.zeros(4, np.int64)])
