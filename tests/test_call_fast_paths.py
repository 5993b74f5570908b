"""The call fast paths give what the full paths give: the memoized argument rule of eager op
calls (``frontends.nd4j.bind_arguments``) and the pre-bound replay of ``@nd.compile`` hits.

Each test makes a call form hit its memo first and then checks that a call differing only in
what the memo must tell apart (a type, a shape, a dtype, a keyword) still takes the full rule,
and that errors are the same on every call (the memo never stores a failing call).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff
from samediff.errors import ArgumentConflictError, OpError
from samediff.frontends.nd4j import bind_arguments, split_call
from samediff.ops import REGISTRY


@pytest.fixture
def x():
    return nd.create(np.arange(12, dtype=np.float32).reshape(3, 4))


def _raises_twice(call, error=OpError):
    """``call`` raises the same error type and message on its first and second call."""
    messages = []
    for _ in range(2):
        with pytest.raises(error) as info:
            call()
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    return messages[0]


def test_repeated_calls_hit_and_agree_with_the_full_rule(x):
    a = x.numpy()
    for _ in range(3):  # first call: full rule; then the memo
        np.testing.assert_array_equal(x.sum(1).numpy(), a.sum(1))
        np.testing.assert_array_equal(nd.sum(x, 0).numpy(), a.sum(0))
        np.testing.assert_array_equal(x.reshape(4, 3).numpy(), a.reshape(4, 3))
        np.testing.assert_array_equal(x.reshape("f", 4, 3).numpy(), a.reshape(4, 3, order="F"))
        np.testing.assert_array_equal(x.mean(axis=0, keepdims=True).numpy(),
                                      a.mean(0, keepdims=True))
    inputs, attrs, name, rec = bind_arguments(REGISTRY["sum"], (x, 1), {})
    assert inputs[0] is x and dict(attrs) == {"dims": (1,)} and rec.dims == (1,)
    with pytest.raises(TypeError):  # the memoized attributes are shared: read-only
        attrs["dims"] = (0,)


def test_values_python_calls_equal_are_told_apart_by_type(x):
    a = x.numpy()
    assert x.sum(1).shape == (3,)
    assert x.sum(True).shape == (1, 1)  # ND4J's flags-first form: keepDims, all dims
    assert x.sum(1).shape == (3,)       # 1 == True, yet not the same call
    np.testing.assert_array_equal(x.sum((0, 1)).numpy(), a.sum((0, 1)))
    _raises_twice(lambda: x.sum((0, True)))  # a bool dim: refused, though (0, 1) hit
    _raises_twice(lambda: x.sum(1.0))
    assert x.reshape((4, 3)).shape == (4, 3)
    _raises_twice(lambda: x.reshape((4.0, 3)))
    np.testing.assert_array_equal(x.sum(axis=1).numpy(), a.sum(1))
    np.testing.assert_array_equal(x.sum(axis=(1,)).numpy(), a.sum(1))
    _raises_twice(lambda: x.sum(axis=(1.0,)))


def test_errors_are_those_of_the_full_rule_every_time(x):
    assert _raises_twice(lambda: x.add(None)) == "an op input is None; pass an array or a number"
    assert _raises_twice(lambda: x.add(x, None)) == ("add: too many positional arguments "
                                                     "(None,); attributes are none")
    with pytest.raises(OpError) as info:  # the full rule says the same
        split_call(REGISTRY["sum"], (x, 1), {"axis": 0})
    assert _raises_twice(lambda: x.sum(1, axis=0), ArgumentConflictError) == str(info.value)
    _raises_twice(lambda: x.sum(axis=1, dims=0), ArgumentConflictError)
    _raises_twice(lambda: x.reshape())
    msg = _raises_twice(lambda: x.reshape(5, 3))
    assert re.search(r"reshape: cannot reshape shape \(3, 4\) \(12 elements\) into shape \(5, 3\)",
                     msg)
    assert x.reshape(4, 3).shape == (4, 3)  # the same form with good sizes still runs
    assert "no other negative size" in _raises_twice(lambda: x.reshape(-2, 6))  # numpy: -1
    _raises_twice(lambda: nd.add(x, x, x))


def test_lists_and_objects_are_never_memoized_but_still_work(x):
    a = x.numpy()
    for _ in range(2):
        np.testing.assert_array_equal(x.sum([0, 1]).numpy(), a.sum((0, 1)))
        np.testing.assert_array_equal(x.reshape([2, 6]).numpy(), a.reshape(2, 6))
        np.testing.assert_array_equal(nd.add(x, a).numpy(), a + a)  # a numpy input


def test_memoized_calls_record_inside_a_trace(x):
    x.sum(1)  # memoized outside
    with nd.graph_scope() as scope:
        y = x.sum(1) * 2.0
    assert [n.op.name for n in scope.graph.graph.nodes] == ["sum", "mul"]
    np.testing.assert_array_equal(y.numpy(), x.numpy().sum(1) * 2)
    sd = SameDiff.create()
    v = sd.constant("c", x.numpy())
    assert x.add(v).shape == (3, 4)  # a graph variable argument records into its graph
    assert [n.op.name for n in sd.graph.nodes] == ["add"]


# -- @nd.compile: the pre-bound replay of a hit ------------------------------------------------

def _dense():
    @nd.compile
    def dense(x, w, b):
        return nd.nn.relu(x @ w + b)
    return dense


def _ref(x, w, b):
    return np.maximum(x @ w + b, 0)


def _args(n, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in ((n, 8), (8, 8), (8,))]


def test_a_hit_then_a_new_shape_or_dtype_retraces_and_stays_right():
    f = _dense()
    a = _args(8)
    for _ in range(3):
        np.testing.assert_allclose(f(*map(nd.create, a)).numpy(), _ref(*a), rtol=1e-5)
    assert f.cache_info()["traces"] == 1
    b = _args(5, seed=1)  # a new batch size after the hit
    np.testing.assert_allclose(f(*map(nd.create, b)).numpy(), _ref(*b), rtol=1e-5)
    assert f.cache_info()["traces"] == 2
    c = _args(8, np.float64, seed=2)  # a new dtype
    out = f(*map(nd.create, c))
    assert out.dtype == np.float64 and f.cache_info()["traces"] == 3
    np.testing.assert_allclose(out.numpy(), _ref(*c), rtol=1e-12)
    np.testing.assert_allclose(f(*map(nd.create, a)).numpy(), _ref(*a), rtol=1e-5)  # old hit
    assert f.cache_info()["traces"] == 3


def test_keywords_numpy_arguments_and_errors_after_a_hit():
    f = _dense()
    a = _args(4)
    X, W, B = map(nd.create, a)
    f(X, W, B)
    np.testing.assert_allclose(f(X, W, b=B).numpy(), _ref(*a), rtol=1e-5)
    np.testing.assert_allclose(f(a[0], W, B).numpy(), _ref(*a), rtol=1e-5)
    bad = nd.create(np.ones((5, 8), np.float32))  # inner dims differ: an OpError each time
    messages = []
    for _ in range(2):
        with pytest.raises(OpError) as info:
            f(X, bad, B)
        messages.append(str(info.value))
    assert messages[0] == messages[1] and "matmul" in messages[0]
    np.testing.assert_allclose(f(X, W, B).numpy(), _ref(*a), rtol=1e-5)


def test_structured_results_and_unused_arguments_replay_right():
    @nd.compile
    def pair(x, y, unused):
        return x + y, [x * y]

    @nd.compile
    def first(x, unused):
        return x * 2.0

    x, y = nd.create([1.0, 2.0]), nd.create([3.0, 4.0])
    for _ in range(3):
        s, (p,) = pair(x, y, x)
        assert s.numpy().tolist() == [4.0, 6.0] and p.numpy().tolist() == [3.0, 8.0]
        assert first(x, y).numpy().tolist() == [2.0, 4.0]
    for _ in range(2):
        single = nd.compile(lambda a, b: (a - b,))(x, y)
        assert isinstance(single, tuple) and single[0].numpy().tolist() == [-2.0, -2.0]


def test_the_lru_order_holds_when_repeated_hits_skip_the_touch():
    f = nd.compile(lambda v: v + 1.0, max_signatures=2)
    s1, s2, s3 = (nd.create(np.zeros(n, np.float32)) for n in (1, 2, 3))
    f(s1)
    f(s1)          # s1 is the most recent: no move
    f(s2)          # traced: s2 most recent
    f(s1)          # a hit on s1 must move it after s2...
    f(s1)
    f(s3)          # ...so s3 evicts s2, not s1
    traces = f.cache_info()["traces"]
    f(s1)
    assert f.cache_info()["traces"] == traces  # s1 kept
    f(s2)
    assert f.cache_info()["traces"] == traces + 1  # s2 was evicted
