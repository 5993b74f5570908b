"""Tracing with ``@nd.compile``: signatures, replay, output structures, the retrace warning,
threads, and plans that fail at run time.

Every test starts from an empty plan cache (``nd.clear_cache()``), so cache counters are exact.
"""
from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import nd4py as nd
from samediff.array import CURRENT_TRACE
from tracing import InterpreterPlan, LazyArray, RetraceWarning, set_planner

from tracing_support import A, B, arr, isolated_plan_cache, stats  # noqa: F401


# ============================================================================================
# @nd.compile
# ============================================================================================


def test_compile_forms():
    calls = []

    @nd.compile
    def f(a, b):
        calls.append("f")
        return a - b

    def g_fn(a, b):
        calls.append("g")
        return a * b

    g = nd.compile(g_fn)
    h = nd.compile(name="named")(lambda a: a + 1)
    x, y = arr(A), arr(A * 2)
    np.testing.assert_array_equal(f(x, y).numpy(), A - A * 2)
    np.testing.assert_array_equal(g(x, y).numpy(), A * A * 2)
    np.testing.assert_array_equal(h(x).numpy(), A + 1)
    assert isinstance(f, nd.CompiledFunction) and isinstance(g, nd.CompiledFunction)
    assert f.__name__ == "f" and g.__name__ == "g_fn" and h.name == "named"
    # numpy arrays are accepted as arguments
    np.testing.assert_array_equal(f(A, A).numpy(), np.zeros_like(A))


def test_compile_nd4j_form_execute():
    calls = []

    def body(inputs):
        calls.append(1)
        a, b = inputs
        return [a + b, a.mmul(b.T)]

    fn = nd.compile(2, body)
    x, y = arr(A), arr(A + 1)
    out = fn.execute(x, y)
    assert isinstance(out, list) and len(out) == 2
    np.testing.assert_array_equal(out[0].numpy(), A + A + 1)
    np.testing.assert_allclose(out[1].numpy(), A @ (A + 1).T)
    out2 = fn.execute(y, x)
    np.testing.assert_allclose(out2[1].numpy(), (A + 1) @ A.T)
    assert len(calls) == 1
    single = nd.compile(1, lambda ins: ins[0] * 2).execute(x)
    assert isinstance(single, list) and len(single) == 1
    np.testing.assert_array_equal(single[0].numpy(), A * 2)
    with pytest.raises(TypeError, match="2 input"):
        fn.execute(x)
    with pytest.raises(TypeError):
        nd.compile(2)


def test_compile_traces_once_per_signature():
    calls = []

    @nd.compile
    def f(x, w):
        calls.append(1)
        return nd.nn.relu(x.mmul(w))

    w = arr(B)
    for k in range(5):
        x = arr(A - k)
        out = f(x, w)
        assert type(out) is nd.NDArray
        np.testing.assert_allclose(out.numpy(), np.maximum((A - k) @ B, 0))
    assert len(calls) == 1 and f.traces == 1
    st = stats()
    assert st["compiles"] == 1


@pytest.mark.parametrize("kind", ["single", "tuple", "list", "dict", "nested", "static"])
def test_compile_preserves_output_structure(kind):
    def body(x):
        if kind == "single":
            return x * 2
        if kind == "tuple":
            return x * 2, x + 1
        if kind == "list":
            return [x * 2, x + 1, x.sum()]
        if kind == "dict":
            return {"double": x * 2, "plus": x + 1}
        if kind == "nested":
            return {"a": [x * 2, (x + 1, {"s": x.sum()})], "b": (x,)}
        return (x * 2, "label", 3, None)

    f = nd.compile(body)
    x = arr(A)
    for _ in range(2):  # traced call, then replay
        out = f(x)
        if kind == "single":
            assert type(out) is nd.NDArray
            np.testing.assert_array_equal(out.numpy(), A * 2)
        elif kind == "tuple":
            assert type(out) is tuple and len(out) == 2
            np.testing.assert_array_equal(out[1].numpy(), A + 1)
        elif kind == "list":
            assert type(out) is list and len(out) == 3
            assert out[2].numpy() == pytest.approx(float(A.sum()))
        elif kind == "dict":
            assert type(out) is dict and list(out) == ["double", "plus"]
            np.testing.assert_array_equal(out["plus"].numpy(), A + 1)
        elif kind == "nested":
            assert type(out["a"]) is list and type(out["a"][1]) is tuple and type(out["b"]) is tuple
            np.testing.assert_array_equal(out["a"][0].numpy(), A * 2)
            np.testing.assert_array_equal(out["a"][1][0].numpy(), A + 1)
            assert out["a"][1][1]["s"].numpy() == pytest.approx(float(A.sum()))
            np.testing.assert_array_equal(out["b"][0].numpy(), A)
        else:
            assert out[1:] == ("label", 3, None)
            np.testing.assert_array_equal(out[0].numpy(), A * 2)
    assert f.traces == 1


def test_new_batch_size_retraces_but_reuses_plan():
    calls = []

    @nd.compile
    def f(x):
        calls.append(x.shape)
        return (x * 2).sum(1)

    for n in (4, 8, 4, 16):
        out = f(nd.ones(n, 3))
        np.testing.assert_array_equal(out.numpy(), np.full(n, 6.0, np.float32))
    assert calls == [(4, 3), (8, 3), (16, 3)]  # one trace per new shape
    st = stats()
    assert st["compiles"] == 1 and st["hits"] == 2, st


def test_new_dtype_compiles_again():
    calls = []

    @nd.compile
    def f(x):
        calls.append(x.dtype)
        return x * 2

    r32 = f(nd.ones(3, dtype=nd.float32))
    r64 = f(nd.ones(3, dtype=nd.float64))
    assert r32.dtype == np.float32 and r64.dtype == np.float64
    assert len(calls) == 2 and stats()["compiles"] == 2


def test_static_arguments_are_part_of_the_key():
    calls = []

    @nd.compile
    def f(x, k, axis=0):
        calls.append((k, axis))
        return (x * k).sum(axis)

    x = arr(A)
    np.testing.assert_array_equal(f(x, 2).numpy(), (A * 2).sum(0))
    np.testing.assert_array_equal(f(x, 3).numpy(), (A * 3).sum(0))
    np.testing.assert_array_equal(f(x, 2).numpy(), (A * 2).sum(0))
    np.testing.assert_array_equal(f(x, 2, axis=1).numpy(), (A * 2).sum(1))
    assert calls == [(2, 0), (3, 0), (2, 1)]


def test_static_arguments_keyed_by_type():
    # 2 == 2.0 == True and they hash alike, but they promote differently
    f = nd.compile(lambda a, k: a * k)
    x = nd.create(np.array([1, 2], dtype=np.int64))
    assert f(x, 2).dtype == np.int64
    r = f(x, 2.0)
    assert r.dtype == (x * 2.0).dtype == np.float64
    np.testing.assert_array_equal(r.numpy(), [2.0, 4.0])
    assert f(x, True).dtype == (x * True).dtype


def test_unhashable_static_argument_is_a_type_error():
    f = nd.compile(lambda a, opts: a * 2)
    with pytest.raises(TypeError, match="hashable"):
        f(arr(A), {1, 2})  # a set: not an array, not hashable
    with pytest.raises(TypeError, match="hashable"):
        f(arr(A), bytearray(b"x"))


def test_same_array_twice_then_different_arrays():
    f = nd.compile(lambda a, b: a - b)
    x, y = arr(A), arr(A * 3)
    np.testing.assert_array_equal(f(x, x).numpy(), np.zeros_like(A))
    np.testing.assert_array_equal(f(x, y).numpy(), A - A * 3)
    np.testing.assert_array_equal(f(y, x).numpy(), A * 3 - A)


def test_argument_that_is_also_captured():
    w = arr(A)
    f = nd.compile(lambda a: a + w)
    np.testing.assert_array_equal(f(w).numpy(), A + A)
    z = arr(np.zeros_like(A))
    np.testing.assert_array_equal(f(z).numpy(), A)


def test_closure_captured_arrays_are_inputs():
    w = arr([1.0, 2.0, 3.0])
    calls = []

    @nd.compile
    def f(x):
        calls.append(1)
        return x * w

    x = arr(A)
    np.testing.assert_array_equal(f(x).numpy(), A * [1, 2, 3])
    w.addi(1)  # eager mutation of the captured array
    np.testing.assert_array_equal(f(x).numpy(), A * [2, 3, 4])
    w.numpy()[:] = 0
    np.testing.assert_array_equal(f(x).numpy(), np.zeros_like(A))
    assert len(calls) == 1


def test_compiled_graph_and_explain():
    @nd.compile
    def f(x, w):
        return nd.nn.sigmoid(x.mmul(w))

    with pytest.raises(nd.TracingError, match="once"):
        f.graph
    f(arr(A), arr(B))
    f(nd.ones(5, 3), arr(B))
    sd = f.graph
    assert isinstance(sd, nd.SameDiff)
    assert "matmul" in sd.summary() and "sigmoid" in sd.summary()
    text = f.explain()
    assert "2 signature(s)" in text and "2 trace(s)" in text
    assert "float32[2, 3]" in text and "float32[5, 3]" in text
    assert "plan:" in text and "cache:" in text


def test_compile_exception_in_function():
    calls = []

    @nd.compile
    def f(x):
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("first call fails")
        return x + 1

    with pytest.raises(ValueError):
        f(arr(A))
    assert CURRENT_TRACE.get() is None and f.traces == 0
    np.testing.assert_array_equal(f(arr(A)).numpy(), A + 1)


def test_compiled_data_dependent_python_raises():
    @nd.compile
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(nd.TracingError, match="sum|gt"):
        f(arr(A))
    assert CURRENT_TRACE.get() is None


# ============================================================================================
# Retrace warning
# ============================================================================================


def test_retrace_warning_once_naming_the_change():
    @nd.compile
    def f(x, d):
        return x.sum(d)

    x = nd.ones(*([2] * 10))
    with pytest.warns(RetraceWarning) as record:
        for d in range(10):
            f(x, d)
    retrace = [w for w in record if issubclass(w.category, RetraceWarning)]
    assert len(retrace) == 1
    msg = str(retrace[0].message)
    assert "attributes of sum" in msg and ".f'" in msg and "9 distinct plans" in msg
    assert stats()["compiles"] == 10


def test_no_retrace_warning_at_the_limit():
    f = nd.compile(lambda x, d: x.sum(d))
    x = nd.ones(*([2] * 8))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RetraceWarning)
        for d in range(8):
            f(x, d)
    assert stats()["compiles"] == 8


def test_retrace_warning_for_a_scope_call_site():
    x = nd.ones(*([2] * 10))
    with pytest.warns(RetraceWarning, match="graph_scope at .*attributes of sum"):
        for d in range(10):
            with nd.graph_scope():
                x.sum(d)


def test_retrace_warning_names_dtype_change():
    f = nd.compile(lambda x: x + 1)
    dts = [nd.float32, nd.float64, nd.int32, nd.int64, nd.int16, nd.int8, nd.uint8, nd.float16,
           nd.int32]
    with pytest.warns(RetraceWarning, match="input dtype"):
        for dt in dts[:8]:
            f(nd.ones(2, 2, dtype=dt))
        f(nd.ones(2, dtype=nd.float32))  # rank change would also count: a 9th key
    assert stats()["compiles"] == 9


# ============================================================================================
# Threads
# ============================================================================================


def test_other_threads_are_not_captured():
    x = arr(A)
    seen = {}

    def worker():
        seen["trace"] = CURRENT_TRACE.get()
        r = x + 1
        seen["type"] = type(r)
        seen["value"] = r.numpy().copy()

    with nd.graph_scope():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        mine = x + 1
        assert isinstance(mine, LazyArray)
    assert seen["trace"] is None and seen["type"] is nd.NDArray
    np.testing.assert_array_equal(seen["value"], A + 1)


def test_lazy_array_from_another_thread_raises():
    errors = []
    ready, done = threading.Event(), threading.Event()
    box = {}

    def tracer():
        with nd.graph_scope():
            box["lazy"] = arr(A) + 1
            ready.set()
            done.wait(5)

    t = threading.Thread(target=tracer)
    t.start()
    assert ready.wait(5)
    try:
        with nd.graph_scope():
            box["lazy"] * 2
    except nd.TracingError as exc:
        errors.append(exc)
    try:
        box["lazy"].numpy()
    except nd.TracingError as exc:
        errors.append(exc)
    done.set()
    t.join()
    assert len(errors) == 2 and "another trace" in str(errors[0])
    np.testing.assert_array_equal(box["lazy"].numpy(), A + 1)


def test_compiled_function_from_eight_threads():
    @nd.compile
    def f(x, w):
        return nd.nn.relu(x.mmul(w) - 1).sum(1)

    w = arr(B)
    n = 8
    barrier = threading.Barrier(n)
    results, errors = {}, []

    def worker(k):
        try:
            barrier.wait(5)
            for rep in range(20):
                x = nd.create((A + k + rep).astype(np.float32))
                results[(k, rep)] = f(x, w).numpy()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == n * 20
    for (k, rep), got in results.items():
        want = np.maximum((A + k + rep) @ B - 1, 0).sum(1)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"thread {k} call {rep}")
    assert 1 <= f.traces <= n


def test_scopes_on_several_threads_are_independent():
    n = 6
    barrier = threading.Barrier(n)
    results, errors = {}, []

    def worker(k):
        try:
            x = nd.create((A * (k + 1)).astype(np.float32))
            with nd.graph_scope():
                barrier.wait(5)  # every thread is inside its own scope at once
                y = x.mmul(arr(B)) + k
                assert isinstance(y, LazyArray)
                barrier.wait(5)
                z = y.sum()
            results[k] = (y.numpy(), z.numpy())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k in range(n):
        want = (A * (k + 1)) @ B + k
        np.testing.assert_allclose(results[k][0], want, rtol=1e-6)
        assert results[k][1] == pytest.approx(float(want.sum()), rel=1e-6)
    assert CURRENT_TRACE.get() is None


# ============================================================================================
# Plans that fail at run time
# ============================================================================================


class _BrokenPlan:
    def __init__(self, nodes, input_slots, output_slots, types=None, **options):
        self.output_slots = tuple(output_slots)

    def execute(self, inputs):
        raise RuntimeError("broken plan")

    def explain(self):
        return "plan: broken"


def test_failing_plan_in_scope():
    x = arr(A)
    previous = set_planner(_BrokenPlan)
    try:
        with pytest.raises(RuntimeError, match="broken plan"):
            with nd.graph_scope():
                y = x + 1
                x.addi(5)
    finally:
        assert set_planner(previous) is _BrokenPlan
    assert CURRENT_TRACE.get() is None
    np.testing.assert_array_equal(x.numpy(), A)  # no partial write-back
    with pytest.raises(nd.TracingError, match=r"add \(node 0\)"):
        y.numpy()
    assert type(x + 1) is nd.NDArray
    # the planner is restored: the same code gets a working plan, not the broken cached one
    with nd.graph_scope():
        y = x + 1
        x.addi(5)
    np.testing.assert_array_equal(y.numpy(), A + 1)
    np.testing.assert_array_equal(x.numpy(), A + 5)


def test_failing_plan_in_compiled_function():
    f = nd.compile(lambda a: a * 2)
    x = arr(A)
    previous = set_planner(_BrokenPlan)
    try:
        with pytest.raises(RuntimeError, match="broken plan"):
            f(x)
    finally:
        set_planner(previous)
    assert CURRENT_TRACE.get() is None
    np.testing.assert_array_equal(f(x).numpy(), A * 2)


def test_runtime_op_error_in_plan_names_the_node():
    # a gather index that is only known at run time (an input array) is out of range
    x = arr(A)
    idx = nd.create(np.array([0, 1], dtype=np.int64))
    f = nd.compile(lambda a, i: nd.gather(a, i))
    np.testing.assert_array_equal(f(x, idx).numpy(), A[[0, 1]])
    bad = nd.create(np.array([0, 7], dtype=np.int64))
    with pytest.raises(nd.OpError, match="gather"):
        f(x, bad)
    np.testing.assert_array_equal(f(x, idx).numpy(), A[[0, 1]])  # still usable


def test_default_planner_is_interpreter():
    with nd.graph_scope() as scope:
        arr(A) + 1
    assert isinstance(scope.plan, InterpreterPlan)


def test_planner_that_fails_to_compile_falls_back_to_the_interpreter(caplog):
    def broken_planner(nodes, inputs, outputs, types, *, exact_shapes, donate):
        raise RuntimeError("kernel generation failed")

    previous = set_planner(broken_planner)
    try:
        x = arr([1.0, -2.0, 3.0])
        with caplog.at_level("WARNING", logger="nd4py.plan"):
            with nd.graph_scope() as scope:
                y = nd.nn.relu(x) * 2.0
                z = y.sum()
        assert y.numpy().tolist() == [2.0, 0.0, 6.0] and z.item() == 8.0  # every output filled
        assert isinstance(scope.plan, InterpreterPlan)
        assert "kernel generation failed" in scope.plan.reason
        assert "fallback" in scope.plan.explain()
        assert stats()["fallbacks"] == 1
        assert any("kernel generation failed" in r.message for r in caplog.records)
    finally:
        set_planner(previous)
