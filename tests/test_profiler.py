"""The profiler (``samediff/profiler.py``): the Chrome trace it writes, the step / compile /
cache events of compiled and interpreted plans, warm-up and step windows, the summary, the
training listener, and that profiling off records nothing and changes no result.

Every graph is tiny (a few 8x8 ops), so the cost is one or two small kernel compiles."""
from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import numpy as np
import pytest

import nd4py as nd
from samediff import compiler, profiler
from samediff.compiler.cache import get_plan, structural_key
from samediff.errors import ConfigError
from samediff.ops import TensorType, get_op
from samediff.training import ProfilingListener

REQUIRED = {"name", "cat", "ph", "ts", "pid", "tid", "args"}


def make_dense():
    """A fresh compiled function: its plans follow the executor of the test that calls it
    (``conftest``: the interpreter unless the test is marked ``compiled``)."""
    @nd.compile
    def dense(x, w, b):
        return nd.nn.relu(x @ w + b)
    return dense


def _args(batch: int = 4):
    return (nd.create(np.arange(batch * 3, dtype=np.float32).reshape(batch, 3)),
            nd.ones(3, 2), nd.create(np.array([0.5, -40.0], np.float32)))


def _events(prof, cat):
    return [e for e in prof.events if e["cat"] == cat]


def _adder(tag: str):
    """A one-node plan ``c = a + b`` under a key of its own (the node name is in the key)."""
    add = get_op("add")
    nodes = [SimpleNamespace(name=f"profiled {tag}", op=add, attrs=add.default_attrs,
                             inputs=("a", "b"), outputs=("c",))]
    t = TensorType((3,), np.dtype("float32"))
    types = {"a": t, "b": t, "c": t}
    key = structural_key(nodes, ["a", "b"], ["c"], types)

    def run():
        plan = get_plan(key, nodes, ["a", "b"], ["c"], types, exact_shapes=True)
        return plan.execute([np.ones(3, np.float32), np.full(3, 2.0, np.float32)])[0]
    return run


@pytest.mark.compiled
def test_trace_file_is_chrome_trace_json_with_steps_shapes_and_dtypes(tmp_path):
    path = tmp_path / "trace.json"
    dense = make_dense()
    dense(*_args())  # traced and compiled before: the profile sees replays only
    with nd.profile(path):
        dense(*_args())
    data = json.loads(path.read_text())
    assert set(data) == {"traceEvents", "displayTimeUnit"}
    events = data["traceEvents"]
    for e in events:
        assert REQUIRED <= set(e), e
        if e["ph"] == "X":
            assert e["dur"] >= 0 and isinstance(e["ts"], float)
    assert {e["ph"] for e in events} <= {"X", "i", "M"}
    by_cat = {}
    for e in events:
        by_cat.setdefault(e["cat"], []).append(e)
    (matmul,) = by_cat["library"]
    assert matmul["name"] == "matmul"
    assert matmul["args"]["inputs"] == ["float32[4,3]", "float32[3,2]"]
    assert matmul["args"]["outputs"] == ["float32[4,2]"]
    (kernel,) = by_cat["kernel"]
    assert kernel["args"]["ops"] == ["add", "relu"]
    assert kernel["args"]["inputs"] == ["float32[4,2]", "float32[2]"]
    (plan,) = by_cat["plan"]  # the steps lie inside their plan's span
    for step in (matmul, kernel):
        assert plan["ts"] <= step["ts"] and step["ts"] + step["dur"] <= plan["ts"] + plan["dur"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert threading.current_thread().name in names


@pytest.mark.compiled
def test_compiles_and_cache_hits_and_misses_are_events():
    run = _adder("cache events")
    with nd.profile() as prof:
        first = run()
        second = run()
    np.testing.assert_array_equal(first, second)
    cache = [e["name"] for e in _events(prof, "cache")]
    assert cache == ["plan cache miss", "plan cache hit"]
    assert all(e["ph"] == "i" for e in _events(prof, "cache"))
    (build,) = _events(prof, "compile")
    assert build["ph"] == "X" and build["args"]["kind"] == "compiled"
    assert build["dur"] > 0
    assert len(_events(prof, "plan")) == 2
    summary = prof.summary()
    assert (summary.hits, summary.misses, summary.compiles) == (1, 1, 1)


def test_warmup_and_steps_select_the_executions():
    dense = make_dense()
    dense(*_args())
    with nd.profile(warmup=2, steps=3) as prof:
        for batch in range(2, 9):  # 7 executions; inputs tell them apart
            dense(*_args(batch))
    assert (prof.executions, prof.recorded) == (7, 3)
    recorded = [e["args"]["inputs"][0] for e in _events(prof, "plan")]
    assert recorded == ["float32[4,3]", "float32[5,3]", "float32[6,3]"]
    assert len(_events(prof, "interpreter")) == 3 * 3  # matmul, add, relu in each


@pytest.mark.compiled
def test_summary_totals_add_up(capsys):
    dense, args = make_dense(), _args()  # (made outside: nd.ones is an eager op)
    dense(*args)
    with nd.profile() as prof:
        for _ in range(4):
            dense(*args)
    table = nd.profile_summary()
    assert "matmul" in capsys.readouterr().out
    assert {(r.op, r.kind, r.calls) for r in table.rows} == {("matmul", "library", 4),
                                                             ("add -> relu", "kernel", 4)}
    steps = _events(prof, "library") + _events(prof, "kernel")
    assert table.step_ms == pytest.approx(sum(e["dur"] for e in steps) / 1000)
    assert sum(r.total_ms for r in table.rows) == pytest.approx(table.step_ms)
    assert sum(r.percent for r in table.rows) == pytest.approx(100.0)
    assert table.rows == sorted(table.rows, key=lambda r: -r.total_ms)
    for r in table.rows:
        assert r.mean_us == pytest.approx(r.total_ms * 1000 / r.calls)
    assert table.plans == 4 and table.plan_ms >= 0


def test_interpreter_plans_record_one_event_per_node():
    previous = compiler.set_executor("interpreter")
    try:
        run = _adder("interpreter")
        with nd.profile() as prof:
            run()
    finally:
        compiler.set_executor(previous)
    (node,) = _events(prof, "interpreter")
    assert node["name"] == "add" and node["args"]["outputs"] == ["float32[3]"]
    assert _events(prof, "plan")[0]["args"]["kind"] == "interpreter"


def test_profiling_off_records_nothing_and_results_are_identical():
    idle = profiler.Profile()  # made but never started
    dense = make_dense()
    expected = dense(*_args()).numpy()
    with nd.profile() as prof:
        during = dense(*_args()).numpy()
    assert not profiler.active
    after = dense(*_args()).numpy()
    n = len(prof.events)
    dense(*_args())
    assert len(prof.events) == n and idle.events == []
    np.testing.assert_array_equal(expected, during)
    np.testing.assert_array_equal(expected, after)


def test_nested_profiles_and_another_threads_plans():
    dense = make_dense()
    dense(*_args())
    stop, ran = threading.Event(), threading.Event()

    def worker():
        while not stop.is_set():
            dense(*_args(5))
            ran.set()

    thread = threading.Thread(target=worker, name="profiled-worker")
    with nd.profile() as outer:
        thread.start()
        try:
            with nd.profile(steps=2) as inner:
                for _ in range(3):
                    dense(*_args())
            assert ran.wait(10)
        finally:
            stop.set()
            thread.join()
    assert not profiler.active
    assert inner.recorded == 2 and len(_events(inner, "plan")) == 2
    assert all(any(e is o for o in outer.events) for e in inner.events)  # outer has them too
    tids = {e["tid"] for e in _events(outer, "plan")}
    assert threading.get_native_id() in tids and len(tids) == 2  # both threads' plans
    names = {e["args"]["name"] for e in outer.trace()["traceEvents"] if e["ph"] == "M"}
    assert "profiled-worker" in names


def test_a_branch_plan_is_recorded_nested_in_its_step():
    @nd.compile
    def branchy(v):
        return nd.cond(v.sum() > 0, lambda a: nd.exp(a) * 2, lambda a: -a, v)

    x = nd.create(np.ones((2, 2), np.float32))
    branchy(x)
    with nd.profile() as prof:
        branchy(x)
    nested = [e for e in prof.events if e["args"].get("nested")]
    assert nested and all(e["cat"] != "cache" for e in nested)
    table = prof.summary()
    assert any(r.kind.startswith("nested ") for r in table.rows)
    assert sum(r.percent for r in table.rows if not r.kind.startswith("nested")) \
        == pytest.approx(100.0)
    assert table.plans == 1


def test_profiling_listener_writes_a_trace_of_the_chosen_iterations(tmp_path):
    sd = nd.SameDiff.create()
    x, y = sd.placeholder("x", nd.FLOAT, -1, 3), sd.placeholder("y", nd.FLOAT, -1, 1)
    w = sd.var("w", nd.FLOAT, 3, 1)
    sd.loss.mean_squared_error("loss", y, x.mmul(w))
    sd.set_loss_variables("loss")
    sd.set_training_config(nd.TrainingConfig(updater=nd.Sgd(0.1), feature_mapping=["x"],
                                             label_mapping=["y"]))
    path = tmp_path / "fit.json"
    listener = nd.ProfilingListener(path, warmup=2, steps=3)
    data = (np.ones((16, 3), np.float32), np.ones((16, 1), np.float32))
    sd.fit(data, epochs=4, batch_size=8, listeners=[listener], verbose=0)  # 8 iterations
    assert listener.iterations_recorded == 3 and not profiler.active
    events = json.loads(path.read_text())["traceEvents"]
    assert any(e["cat"] == "interpreter" and e["name"] == "matmul" for e in events)
    plans = [e for e in events if e["cat"] == "plan"]
    assert plans and len(plans) % 3 == 0  # the same plan(s) in each recorded iteration
    assert listener.profile.summary().rows


def test_bad_windows_are_refused():
    with pytest.raises(ConfigError, match="warmup"):
        nd.profile(warmup=-1)
    with pytest.raises(ConfigError, match="steps"):
        nd.profile(steps=0)
    with pytest.raises(Exception, match="steps"):
        ProfilingListener("x.json", steps=0)


def test_eager_op_calls_are_events_and_traced_calls_are_not():
    x = nd.create(np.ones((2, 3), np.float32))
    with nd.profile() as prof:
        nd.exp(x).sum(1)
        with nd.graph_scope():
            y = nd.exp(x) * 2  # recorded, then run as a plan: no eager event for it
    eager = _events(prof, "eager")
    assert [e["name"] for e in eager] == ["exp", "sum"]
    assert eager[0]["args"]["inputs"] == ["float32[2,3]"]
    assert eager[1]["args"]["outputs"] == ["float32[2]"]
    assert _events(prof, "plan") and float(y.sum().item()) == pytest.approx(6 * 2 * np.e)
    assert {r.kind for r in prof.summary().rows} >= {"eager", "interpreter"}


def test_a_forked_child_neither_records_nor_writes_the_parents_profile(tmp_path):
    import os
    path = tmp_path / "parent.json"
    with nd.profile(path):
        nd.exp(nd.ones(2))
        pid = os.fork()
        if pid:  # the parent: the child is done before the parent leaves the block
            _, status = os.waitpid(pid, 0)
        else:
            nd.exp(nd.ones(3))  # not recorded in the child
        ok = pid != 0 or not profiler.active
    if pid == 0:  # leaving the block in the child wrote nothing
        os._exit(0 if ok and not path.exists() else 1)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [e["name"] for e in json.loads(path.read_text())["traceEvents"]
            if e["cat"] == "eager"] == ["ones", "exp"]
