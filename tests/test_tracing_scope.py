"""Tracing with ``graph_scope``: LazyArray, scopes, inputs and plan-cache keys, exceptions,
in-place write-back, nesting and random ops.

Every test starts from an empty plan cache (``nd.clear_cache()``), so cache counters are exact.
"""
from __future__ import annotations

import gc

import numpy as np
import pytest

import nd4py as nd
from samediff.array import CURRENT_TRACE
from tracing import PLAN_CACHE, LazyArray

from tracing_support import A, B, arr, isolated_plan_cache, stats  # noqa: F401


# ============================================================================================
# LazyArray while tracing
# ============================================================================================


def test_lazy_metadata_during_trace():
    x = arr(A)
    with nd.graph_scope():
        y = x.mmul(arr(B)) + 1
        s = y.sum(0, keep_dims=True)
        c = y.cast_to(nd.float64)
        assert isinstance(y, LazyArray) and isinstance(y, nd.NDArray)
        assert not y.is_materialized
        assert y.shape == (2, 2) and y.dtype == np.float32
        assert y.rank == 2 and y.ndim == 2 and y.length == 4 and y.size == 4 and len(y) == 2
        assert s.shape == (1, 2) and c.dtype == np.float64
        b = y > 0
        assert b.dtype == np.bool_
        r = repr(y)  # never raises
        assert "LazyArray" in r and "pending" in r and "add" in r and "(2, 2)" in r
    assert y.is_materialized
    np.testing.assert_allclose(y.numpy(), A @ B + 1)


_SURFACE = {
    "add": lambda x, y: x.add(y),
    "sub": lambda x, y: x.sub(y),
    "mul": lambda x, y: x.mul(y),
    "div": lambda x, y: x.div(y + 10),
    "rsub": lambda x, y: x.rsub(1.0),
    "rdiv": lambda x, y: x.rdiv(2.0),
    "mmul": lambda x, y: x.mmul(y.T),
    "matmul_op": lambda x, y: x @ y.T,
    "sum0": lambda x, y: x.sum(0),
    "sum_all": lambda x, y: x.sum(),
    "mean1": lambda x, y: x.mean(1),
    "max": lambda x, y: x.max(1),
    "index": lambda x, y: x[0],
    "slice": lambda x, y: x[:, 1:],
    "T": lambda x, y: x.T,
    "transpose": lambda x, y: x.transpose(),
    "reshape": lambda x, y: x.reshape(3, 2),
    "neg_abs": lambda x, y: abs(-x),
    "pow": lambda x, y: x ** 2,
    "rpow": lambda x, y: 2 ** x,
    "radd": lambda x, y: 1 + x,
    "rsub_op": lambda x, y: 1 - x,
    "rmul": lambda x, y: 3 * x,
    "rtruediv": lambda x, y: 1 / (x + 10),
    "floordiv": lambda x, y: x // 2,
    "mod": lambda x, y: x % 2,
    "cmp": lambda x, y: (x > 2) & (x <= 5) | ~(x == y),
    "ne": lambda x, y: x != y,
    "exp": lambda x, y: x.exp(),
    "tanh": lambda x, y: x.tanh(),
    "cast": lambda x, y: x.cast_to(nd.int32),
    "castTo": lambda x, y: x.castTo(nd.float64),
    "nd_func": lambda x, y: nd.nn.relu(nd.matmul(x, y.T) - 20),
    "concat": lambda x, y: nd.concat([x, y], axis=0),
    "iter": lambda x, y: [r * 2 for r in x][1],
    "dup": lambda x, y: x.dup(),
}


@pytest.mark.parametrize("name", sorted(_SURFACE))
def test_operator_and_method_surface_on_lazy_arrays(name):
    fn = _SURFACE[name]
    x, y = arr(A), arr(A[::-1].copy())
    want = fn(x, y)
    assert type(want) is nd.NDArray
    with nd.graph_scope():
        lx, ly = x + 0, y + 0  # LazyArrays: the surface is exercised on proxies, not eager arrays
        got = fn(lx, ly)
        assert isinstance(got, LazyArray), f"{name}: got {type(got).__name__} while tracing"
        assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.dtype == want.dtype


_DATA_ACCESS = {
    "np.asarray": lambda y: np.asarray(y),
    "numpy()": lambda y: y.numpy(),
    "float()": lambda y: float(y.sum()),
    "int()": lambda y: int(y.sum()),
    "item()": lambda y: y.sum().item(),
    "get_double": lambda y: y.get_double(0, 0),
    "str": lambda y: str(y),
    "print": lambda y: print(y),
    "format": lambda y: f"{y}",
    "tolist": lambda y: np.asarray(y).tolist(),
}


@pytest.mark.parametrize("what", sorted(_DATA_ACCESS))
def test_data_access_before_end_raises_naming_the_op(what):
    x = arr(A)
    with nd.graph_scope():
        y = x.mmul(arr(B))
        with pytest.raises(nd.TracingError, match=r"matmul|sum"):
            _DATA_ACCESS[what](y)
    np.testing.assert_allclose(y.numpy(), A @ B)


def test_bool_in_if_raises_tracing_error():
    x = arr(A)
    with nd.graph_scope():
        y = x.exp()
        with pytest.raises(nd.TracingError, match=r"gt \(node \d+\)"):
            if y.sum() > 0:  # noqa: SIM108 - the `if` itself is under test
                pass
        with pytest.raises(nd.TracingError, match="gt"):
            bool(y.max() > y.min()) and None
        with pytest.raises(nd.TracingError):
            _ = y.sum() > 0 and True


def test_error_message_names_the_producing_op_and_suggests_a_fix():
    with nd.graph_scope():
        y = nd.nn.softmax(arr(A))
        with pytest.raises(nd.TracingError) as info:
            y.numpy()
    msg = str(info.value)
    assert "softmax (node 0)" in msg and "graph_scope" in msg


def test_after_scope_behaves_like_ndarray():
    x = arr(A)
    with nd.graph_scope():
        y = x * 2
    assert isinstance(y, nd.NDArray) and y.is_materialized
    assert isinstance(y.numpy(), np.ndarray)
    np.testing.assert_array_equal(np.asarray(y), A * 2)
    z = y + 1  # eager now
    assert type(z) is nd.NDArray
    np.testing.assert_array_equal(z.numpy(), A * 2 + 1)
    assert float(y.sum()) == pytest.approx(float((A * 2).sum()))
    assert y.sum().item() == pytest.approx(42.0)
    assert "LazyArray" not in repr(y) and "NDArray" in repr(y)
    assert str(y) == str(A * 2)
    y.addi(1)  # eager in-place on a materialized array
    np.testing.assert_array_equal(y.numpy(), A * 2 + 1)
    assert bool((y > 0).all())


# ============================================================================================
# Scopes: begin/end, graph, explain
# ============================================================================================


def test_explicit_begin_end():
    x = arr(A)
    scope = nd.graph_scope("explicit")
    assert scope.begin() is scope
    y = x + 1
    assert isinstance(y, LazyArray) and CURRENT_TRACE.get() is not None
    scope.end()
    assert CURRENT_TRACE.get() is None
    np.testing.assert_array_equal(y.numpy(), A + 1)
    assert type(x + 1) is nd.NDArray
    with pytest.raises(nd.TracingError):
        scope.end()  # end without begin


def test_begin_twice_raises():
    scope = nd.graph_scope()
    scope.begin()
    try:
        with pytest.raises(nd.TracingError, match="twice"):
            scope.begin()
    finally:
        scope.end()


def test_graph_and_explain():
    x, w = arr(A), arr(B)
    with nd.graph_scope("my scope") as scope:
        y = nd.nn.relu(x.mmul(w) - 1)
    assert isinstance(scope.graph, nd.SameDiff)
    summary = scope.graph.summary()
    assert "matmul" in summary and "relu" in summary and "sub" in summary
    assert len(scope.graph.placeholders()) == 3  # x, w and the weak scalar 1
    # the graph is executable and reproduces the trace
    feeds = {"in_0": A, "in_1": B, "in_2": 1}
    out = scope.graph.output(feeds, "out_0")["out_0"]
    np.testing.assert_allclose(out.numpy(), y.numpy())
    text = scope.explain()
    assert "matmul" in text and "plan:" in text and "cache:" in text and "compiles" in text
    assert scope.summary() == summary


def test_graph_before_end_raises():
    with nd.graph_scope() as scope:
        arr(A) + 1
        with pytest.raises(nd.TracingError, match="after the scope ends"):
            scope.graph


# ============================================================================================
# Inputs, weak scalars and the plan cache
# ============================================================================================


def _scoped_affine(x, w):
    with nd.graph_scope() as scope:
        y = (x.mmul(w) + 1).sum(1)
    return y, scope


def test_eager_arrays_are_inputs_not_constants():
    w = arr(B)
    results = []
    for k in range(4):
        x = arr(A + k)
        y, scope = _scoped_affine(x, w)
        results.append(y.numpy())
        np.testing.assert_allclose(y.numpy(), ((A + k) @ B + 1).sum(1), rtol=1e-6)
    assert len({r.tobytes() for r in results}) == 4, "new input values must give new results"
    st = stats()
    assert st["compiles"] == 1 and st["misses"] == 1 and st["hits"] == 3, st


def test_mutated_input_is_read_at_run_time():
    x, w = arr(A), arr(B)
    y1, _ = _scoped_affine(x, w)
    x.addi(1)  # eager mutation of the same object between runs
    y2, _ = _scoped_affine(x, w)
    np.testing.assert_allclose(y2.numpy(), ((A + 1) @ B + 1).sum(1), rtol=1e-6)
    assert not np.array_equal(y1.numpy(), y2.numpy())
    assert stats()["hits"] == 1


def test_weak_scalars_are_inputs_one_plan():
    x = arr(A)
    outs = []
    for k in (2, 3, 0.5):
        with nd.graph_scope():
            y = x * k
        outs.append(y)
    np.testing.assert_array_equal(outs[0].numpy(), A * 2)
    np.testing.assert_array_equal(outs[1].numpy(), A * 3)
    assert outs[0].dtype == np.float32 and outs[1].dtype == np.float32
    np.testing.assert_array_equal(outs[2].numpy(), A * 0.5)
    st = stats()
    # 2 and 3 (weak ints) share a plan; 0.5 is a weak float: a different input dtype
    assert st["compiles"] == 2 and st["hits"] == 1, st


def test_new_batch_size_reuses_plan():
    w = arr(B)
    for n in (2, 5, 7):
        x = nd.ones(n, 3)
        y, _ = _scoped_affine(x, w)
        assert y.shape == (n,)
        np.testing.assert_allclose(y.numpy(), (np.ones((n, 3)) @ B + 1).sum(1))
    assert stats()["compiles"] == 1


def test_cache_key_includes_attrs():
    x = arr(A)
    for d in (0, 1, 0):
        with nd.graph_scope():
            y = x.sum(d)
        np.testing.assert_array_equal(y.numpy(), A.sum(d))
    st = stats()
    assert st["compiles"] == 2 and st["hits"] == 1, st


def test_cache_key_includes_wiring():
    a, b = arr(A), arr(A * 3)
    with nd.graph_scope():
        s1 = a + b
        d1 = a - b
    with nd.graph_scope():
        s2 = a + b
        d2 = b - a
    np.testing.assert_array_equal(d1.numpy(), A - A * 3)
    np.testing.assert_array_equal(d2.numpy(), A * 3 - A)
    np.testing.assert_array_equal(s1.numpy(), s2.numpy())
    assert stats()["compiles"] == 2


def test_compiled_cache_key_includes_wiring():
    calls = []

    @nd.compile
    def f(a, b, flip):
        calls.append(flip)
        return b - a if flip else a - b

    x, y = arr(A), arr(A * 5)
    np.testing.assert_array_equal(f(x, y, False).numpy(), A - A * 5)
    np.testing.assert_array_equal(f(x, y, True).numpy(), A * 5 - A)
    np.testing.assert_array_equal(f(y, x, True).numpy(), A - A * 5)
    assert calls == [False, True]
    st = stats()
    assert st["compiles"] == 2 and st["hits"] == 0, st


def test_cache_key_includes_dtype():
    for dt in (np.float32, np.float64, np.float32):
        x = nd.create(A.astype(dt))
        with nd.graph_scope():
            y = x * 2
        assert y.dtype == dt
    st = stats()
    assert st["compiles"] == 2 and st["hits"] == 1, st


def test_lru_eviction_and_stats():
    nd.set_cache_size(2)
    x = arr(A)

    def run(d):
        with nd.graph_scope():
            y = x.sum(d)
        return y

    run(0), run(1)
    assert stats()["evictions"] == 0
    run(0)  # hit: 0 becomes most recently used
    run(None)  # evicts 1 (least recently used)
    st = stats()
    assert st["evictions"] == 1 and st["compiles"] == 3 and st["hits"] == 1, st
    run(0)  # still cached
    assert stats()["hits"] == 2
    np.testing.assert_array_equal(run(1).numpy(), A.sum(1))  # was evicted: compiled again
    st = stats()
    assert st["compiles"] == 4 and st["evictions"] == 2, st
    assert len(PLAN_CACHE) == 2
    with pytest.raises(ValueError):
        nd.set_cache_size(0)


def test_clear_cache_resets():
    x = arr(A)
    for _ in range(2):
        with nd.graph_scope():
            x + 1
    assert stats()["hits"] == 1
    nd.clear_cache()
    counters = {k: stats()[k] for k in ("hits", "misses", "compiles", "fallbacks", "evictions", "plans")}
    assert counters == {"hits": 0, "misses": 0, "compiles": 0, "fallbacks": 0, "evictions": 0,
                        "plans": 0}
    assert len(PLAN_CACHE) == 0
    with nd.graph_scope():
        x + 1
    assert stats()["compiles"] == 1 and stats()["misses"] == 1


# ============================================================================================
# What gets materialized
# ============================================================================================


def test_plan_outputs_only_live_arrays():
    x = arr(A)
    with nd.graph_scope() as scope:
        t = x * 2
        u = t + 1
        y = u.sum()
        del t, u
        gc.collect()
    assert scope.plan.output_slots and len(scope.plan.output_slots) == 1
    assert y.numpy() == pytest.approx(float((A * 2 + 1).sum()))
    assert [v.name for v in scope.graph.variables() if v.name.startswith("out_")] == ["out_0"]


def test_held_intermediates_get_values():
    x = arr(A)
    with nd.graph_scope() as scope:
        t = x * 2
        u = t + 1
        y = u.sum()
    assert len(scope.plan.output_slots) == 3
    np.testing.assert_array_equal(t.numpy(), A * 2)
    np.testing.assert_array_equal(u.numpy(), A * 2 + 1)
    assert y.numpy() == pytest.approx(float((A * 2 + 1).sum()))


def test_dead_branches_are_not_executed():
    x = arr(A)
    with nd.graph_scope() as scope:
        y = x + 1
        x.exp().log().sum()  # result never held
    assert [n.op.name for n in scope.plan.nodes] == ["add"]
    np.testing.assert_array_equal(y.numpy(), A + 1)


def test_holding_different_intermediates_changes_the_key():
    x = arr(A)
    with nd.graph_scope():
        t = x * 2
        y = t + 1
    with nd.graph_scope():
        y2 = (x * 2) + 1
    np.testing.assert_array_equal(t.numpy(), A * 2)
    np.testing.assert_array_equal(y.numpy(), y2.numpy())
    assert stats()["compiles"] == 2


# ============================================================================================
# Exceptions inside a scope
# ============================================================================================


def test_exception_inside_block_runs_nothing():
    x = arr(A)
    with pytest.raises(ZeroDivisionError):
        with nd.graph_scope():
            y = x + 1
            x.addi(100)
            1 / 0
    assert CURRENT_TRACE.get() is None
    np.testing.assert_array_equal(x.numpy(), A)  # the write-back never happened
    assert stats()["compiles"] == 0 and stats()["misses"] == 0
    after = x + 1
    assert type(after) is nd.NDArray and not isinstance(after, LazyArray)
    np.testing.assert_array_equal(after.numpy(), A + 1)
    with pytest.raises(nd.TracingError, match=r"add \(node 0\).*raised an exception"):
        y.numpy()
    with pytest.raises(nd.TracingError):
        y + 1  # using it in a new op
    with pytest.raises(nd.TracingError):
        float(y.sum())
    assert "failed" in repr(y)


def test_failed_trace_arrays_in_a_new_scope_raise():
    x = arr(A)
    with pytest.raises(KeyError):
        with nd.graph_scope():
            y = x + 1
            raise KeyError("boom")
    with pytest.raises(nd.TracingError, match="raised an exception"):
        with nd.graph_scope():
            y * 2
    assert CURRENT_TRACE.get() is None


def test_op_error_inside_scope_raises_at_the_call():
    x = arr(A)
    with pytest.raises(nd.OpError):
        with nd.graph_scope():
            y = x + 1
            x.mmul(x)  # (2,3) @ (2,3): shape inference refuses at trace time
    assert CURRENT_TRACE.get() is None
    with pytest.raises(nd.TracingError):
        y.numpy()


def test_scope_usable_again_after_exception():
    x = arr(A)
    with pytest.raises(RuntimeError):
        with nd.graph_scope():
            x + 1
            raise RuntimeError
    with nd.graph_scope():
        y = x + 1
    np.testing.assert_array_equal(y.numpy(), A + 1)


# ============================================================================================
# In-place updates
# ============================================================================================


def test_inplace_method_is_written_back_and_seen_later():
    x, y = arr(A), arr([1.0, 2.0, 3.0])
    buf = x.numpy()
    with nd.graph_scope():
        x.addi(y)
        assert type(x) is nd.NDArray  # the outside array object is kept
        seen = x * 2
        x.muli(2)
        seen2 = x.sum()
    np.testing.assert_array_equal(x.numpy(), (A + [1, 2, 3]) * 2)
    assert x.numpy() is buf, "the write-back goes into the original buffer"
    np.testing.assert_array_equal(seen.numpy(), (A + [1, 2, 3]) * 2)
    assert seen2.numpy() == pytest.approx(float(((A + [1, 2, 3]) * 2).sum()))


def test_inplace_operator_is_written_back():
    x = arr(A)
    ref = x
    with nd.graph_scope():
        x += 1
        y = x * 10
        x -= 0.5
    assert x is ref
    np.testing.assert_array_equal(x.numpy(), A + 0.5)
    np.testing.assert_array_equal(y.numpy(), (A + 1) * 10)


def test_inplace_on_lazy_array():
    x = arr(A)
    with nd.graph_scope():
        y = x * 1
        alias = y
        y += 1
        y.muli(3)
        z = y + 0
    assert alias is y
    np.testing.assert_array_equal(y.numpy(), (A + 1) * 3)
    np.testing.assert_array_equal(z.numpy(), (A + 1) * 3)
    np.testing.assert_array_equal(x.numpy(), A)


def test_inplace_writeback_same_as_eager():
    def program(x, y):
        x.addi(y)
        x.subi(1.5)
        x *= 2
        return x.sum(0)

    xe, ye = arr(A), arr([1.0, -1.0, 0.5])
    want = program(xe, ye)
    xt, yt = arr(A), arr([1.0, -1.0, 0.5])
    with nd.graph_scope():
        got = program(xt, yt)
    np.testing.assert_array_equal(xt.numpy(), xe.numpy())
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_inplace_of_viewed_array_raises():
    x = arr(A)
    with pytest.raises(nd.TracingError, match="view"):
        with nd.graph_scope():
            v = x[0]  # noqa: F841
            x.addi(1)
    np.testing.assert_array_equal(x.numpy(), A)


def test_inplace_through_traced_view_raises():
    x = arr(A)
    with pytest.raises(nd.TracingError, match="view"):
        with nd.graph_scope():
            v = x.reshape(3, 2)
            v.addi(1)
    np.testing.assert_array_equal(x.numpy(), A)


def test_inplace_of_eager_view_with_base_in_use_raises():
    x = arr(A)
    v = x[0]  # an eager view, made before the scope
    with pytest.raises(nd.TracingError, match="shares memory"):
        with nd.graph_scope():
            y = x + 0  # noqa: F841
            v.addi(1)
    np.testing.assert_array_equal(x.numpy(), A)


def test_base_used_after_inplace_of_eager_view_raises():
    # the alias appears only after the in-place update: the traced read of ``x`` would miss
    # the update to its row, so it must be refused rather than return stale values
    x = arr(A)
    v = x[0]
    with pytest.raises(nd.TracingError, match="shares memory"):
        with nd.graph_scope():
            v.addi(1)
            x + 0
    np.testing.assert_array_equal(x.numpy(), A)


def test_view_used_after_inplace_of_its_base_raises():
    x = arr(A)
    v = x[0]
    with pytest.raises(nd.TracingError, match="shares memory"):
        with nd.graph_scope():
            x.addi(1)
            v * 2
    np.testing.assert_array_equal(x.numpy(), A)


@pytest.mark.parametrize("mutate", ["setitem", "put_scalar", "putScalar", "assign", "setitem_lazy"])
def test_item_assignment_inside_scope_raises(mutate):
    x = arr(A)
    with pytest.raises(nd.TracingError, match="graph_scope"):
        with nd.graph_scope():
            if mutate == "setitem":
                x[0, 0] = 5.0
            elif mutate == "put_scalar":
                x.put_scalar(0, 0, 5.0)
            elif mutate == "putScalar":
                x.putScalar(1, 2, 5.0)
            elif mutate == "assign":
                x.assign(0.0)
            else:
                y = x + 1
                y[0] = 3.0
    np.testing.assert_array_equal(x.numpy(), A)


def test_float_into_int_inplace_raises_dtype_error():
    i = nd.create(np.array([1, 2, 3], dtype=np.int64))
    with pytest.raises(nd.NdDTypeError, match="float"):
        with nd.graph_scope():
            i.addi(0.5)
    with pytest.raises(nd.NdDTypeError):
        with nd.graph_scope():
            i += arr([1.0, 1.0, 1.0])
    np.testing.assert_array_equal(i.numpy(), [1, 2, 3])
    assert CURRENT_TRACE.get() is None


def test_int_into_float_inplace_is_cast():
    x = arr([1.0, 2.0])
    with nd.graph_scope():
        x.addi(nd.create(np.array([1, 1], dtype=np.int64)))
    assert x.dtype == np.float32
    np.testing.assert_array_equal(x.numpy(), [2.0, 3.0])


def test_inplace_shape_change_raises():
    x = arr([1.0, 2.0, 3.0])
    with pytest.raises(nd.OpError, match="shape"):
        with nd.graph_scope():
            x.addi(arr(A))
    np.testing.assert_array_equal(x.numpy(), [1, 2, 3])


# ============================================================================================
# Nesting and compiled functions inside scopes
# ============================================================================================


def test_nested_scopes_join_the_outer_trace():
    # ND4J refuses nested scopes; here an inner scope joins the outer trace (as nested jax.jit
    # inlines): one plan, and every array gets its value when the outermost scope ends.
    x = arr(A)
    with nd.graph_scope() as outer:
        a = x * 2
        with nd.graph_scope() as inner:
            b = a + 1
        assert isinstance(b, LazyArray) and not b.is_materialized  # traced until the outer end
        c = b * 3
    assert a.is_materialized and b.is_materialized and c.is_materialized
    np.testing.assert_array_equal(b.numpy(), A * 2 + 1)
    np.testing.assert_array_equal(c.numpy(), (A * 2 + 1) * 3)
    assert stats()["compiles"] == 1
    assert [n.op.name for n in outer.graph.graph.nodes] == ["mul", "add", "mul"]
    with pytest.raises(nd.TracingError, match="joined"):
        inner.graph
    assert CURRENT_TRACE.get() is None


def test_a_library_function_that_opens_a_scope_composes_with_its_caller():
    def normalize(v):                      # a library helper written for eager callers
        with nd.graph_scope():
            out = (v - v.mean()) / (v.std() + 1e-6)
        return out

    x = arr(A)
    eager = normalize(x)                   # alone: its own scope, planned and run
    assert eager.is_materialized

    @nd.compile
    def f(v):
        return normalize(v) * 2            # inside a compiled function: inlined, one plan

    with nd.graph_scope():
        y = normalize(x) + 1
    np.testing.assert_allclose(y.numpy(), eager.numpy() + 1, rtol=1e-6)
    np.testing.assert_allclose(f(x).numpy(), eager.numpy() * 2, rtol=1e-6)


def test_a_joined_scope_traces_in_its_own_mode_and_restores_the_outer_one():
    x = nd.ones(4, 100)
    with nd.graph_scope():
        with nd.graph_scope(training=True):
            dropped = nd.nn.dropout(x, 0.5)
        kept = nd.nn.dropout(x, 0.5)       # the outer scope is in inference mode again
    assert set(np.unique(dropped.numpy()).tolist()) == {0.0, 2.0}
    np.testing.assert_array_equal(kept.numpy(), np.ones((4, 100), np.float32))


def test_an_exception_in_a_joined_scope_reaches_the_outer_block():
    x = arr(A)
    with pytest.raises(ValueError, match="boom"):
        with nd.graph_scope():
            a = x * 2
            with nd.graph_scope():
                raise ValueError("boom")
    assert CURRENT_TRACE.get() is None
    with pytest.raises(nd.TracingError):
        a.numpy()                          # the outer trace was discarded: nothing ran
    with nd.graph_scope():                 # caught inside the outer block: it carries on
        a = x * 2
        try:
            with nd.graph_scope():
                raise KeyError("inner")
        except KeyError:
            pass
        b = a + 1
    np.testing.assert_array_equal(b.numpy(), A * 2 + 1)


def test_ending_the_outer_scope_before_a_joined_one_is_refused():
    outer = nd.graph_scope()
    outer.begin()
    inner = nd.graph_scope()
    inner.begin()
    y = arr(A) * 2
    outer.end()
    with pytest.raises(nd.TracingError, match="before their outer scope"):
        inner.end()
    np.testing.assert_array_equal(y.numpy(), A * 2)
    assert CURRENT_TRACE.get() is None


def test_compiled_function_inside_scope_is_inlined():
    calls = []

    @nd.compile
    def f(a, b):
        calls.append(1)
        return a * b + 1

    x = arr(A)
    f(x, x)
    assert f.traces == 1 and len(calls) == 1
    with nd.graph_scope() as scope:
        r1 = f(x, x)
        r2 = f(r1, x)
        assert isinstance(r1, LazyArray) and isinstance(r2, LazyArray)
    assert len(calls) == 3  # the Python function ran once per call inside the scope
    assert f.traces == 1, "inlined calls must not create traces of the compiled function"
    np.testing.assert_array_equal(r1.numpy(), A * A + 1)
    np.testing.assert_array_equal(r2.numpy(), (A * A + 1) * A + 1)
    assert sum(1 for n in scope.plan.nodes if n.op.name == "mul") == 2


def test_compiled_function_with_inplace_on_argument():
    @nd.compile
    def step(p, g):
        p.subi(g * 0.5)
        return p.sum()

    p, g = arr(A), arr(np.ones_like(A))
    s1 = step(p, g)
    np.testing.assert_allclose(p.numpy(), A - 0.5)
    assert s1.numpy() == pytest.approx(float((A - 0.5).sum()))
    s2 = step(p, g)  # replay also writes back
    np.testing.assert_allclose(p.numpy(), A - 1.0)
    assert s2.numpy() == pytest.approx(float((A - 1.0).sum()))
    assert step.traces == 1


# ============================================================================================
# Random ops
# ============================================================================================


def test_random_in_compiled_function_fresh_and_reproducible():
    @nd.compile
    def noisy(x):
        return x + nd.random.uniform(2, 3)

    x = nd.zeros(2, 3)
    nd.random.set_seed(11)
    a, b = noisy(x).numpy().copy(), noisy(x).numpy().copy()
    assert not np.array_equal(a, b), "a replay must draw fresh numbers"
    nd.random.set_seed(11)
    c, d = noisy(x).numpy().copy(), noisy(x).numpy().copy()
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(b, d)
    assert noisy.traces == 1
    nd.random.set_seed(11)
    np.testing.assert_array_equal(nd.random.uniform(2, 3).numpy(), a)  # same stream as eager


def test_random_in_scope_matches_eager_stream():
    nd.random.set_seed(5)
    eager = [nd.random.normal(3).numpy() for _ in range(2)]
    nd.random.set_seed(5)
    with nd.graph_scope():
        traced = [nd.random.normal(3) for _ in range(2)]
    for e, t in zip(eager, traced):
        np.testing.assert_array_equal(e, t.numpy())
    assert not np.array_equal(eager[0], eager[1])
