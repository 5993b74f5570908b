"""The one plan cache (``samediff.compiler.cache``): LRU order, statistics, the interpreter
fallback and what it lets through, keys, discard, thread safety, and the planner protocol.

Nodes are duck-typed, so the graphs here are lists of ``SimpleNamespace`` nodes over real ops.
"""
from __future__ import annotations

import threading
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from tracing_support import isolated_plan_cache  # noqa: F401  (every test: an empty cache)

import nd4py as nd
from samediff import compiler
from samediff.compiler import cache
from samediff.compiler.cache import (PLAN_CACHE, PlanCache, RetraceWarning, build_plan,
                                     describe_key_change, get_plan, set_planner, structural_key)
from samediff.interpreter import InterpreterPlan
from samediff.ops import TensorType, get_op

F32 = TensorType((3,), np.dtype("float32"))


def node(op: str, inputs: tuple, outputs: tuple, name: str = "", **attrs):
    opdef = get_op(op)
    return SimpleNamespace(name=name or op, op=opdef,
                           attrs=opdef.make_attrs(attrs) if attrs else opdef.default_attrs,
                           inputs=inputs, outputs=outputs)


def graph(second: str = "mul"):
    """``d = (a + b) <second> b`` with every value a float32[3]."""
    nodes = [node("add", ("a", "b"), ("c",)), node(second, ("c", "b"), ("d",))]
    return nodes, ["a", "b"], ["d"], {k: F32 for k in "abcd"}


def request(nodes, ins, outs, types, **options):
    return get_plan(structural_key(nodes, ins, outs, types), nodes, ins, outs, types, **options)


def run(plan) -> list:
    return plan.execute([np.array([1.0, 2.0, 3.0], np.float32), np.full(3, 2.0, np.float32)])


@pytest.fixture
def planner():
    """Install a planner for one test; the previous one is restored."""
    previous = []

    def install(p):
        previous.append(set_planner(p))
        return p

    yield install
    if previous:
        set_planner(previous[0])


# ============================================================================================
# LRU and statistics
# ============================================================================================


def test_lru_evicts_the_least_recently_used():
    lru = PlanCache(maxsize=2)
    plans = {k: object() for k in "abc"}
    lru.get_or_build("a", lambda: plans["a"])
    lru.get_or_build("b", lambda: plans["b"])
    assert lru.get_or_build("a", lambda: pytest.fail("a is cached")) is plans["a"]  # a: recent
    lru.get_or_build("c", lambda: plans["c"])  # evicts b, the least recently used
    assert list(lru._plans) == ["a", "c"]
    assert lru.stats.as_dict() == {"hits": 1, "misses": 3, "compiles": 3, "fallbacks": 0,
                                   "evictions": 1}
    lru.resize(1)
    assert list(lru._plans) == ["c"] and lru.stats.evictions == 2
    lru.clear()
    assert len(lru) == 0 and lru.stats.as_dict()["misses"] == 0


def test_a_build_that_raises_caches_nothing():
    lru = PlanCache(maxsize=4)
    with pytest.raises(ZeroDivisionError):
        lru.get_or_build("k", lambda: 1 / 0)
    assert len(lru) == 0 and lru.stats.compiles == 0
    assert lru.get_or_build("k", lambda: "plan") == "plan"


def test_get_plan_counts_in_the_shared_cache_and_nd_clear_cache_empties_it():
    nodes, ins, outs, types = graph()
    plan = request(nodes, ins, outs, types)
    np.testing.assert_array_equal(run(plan)[0], [6.0, 8.0, 10.0])
    assert request(*graph()) is plan  # new node objects, same structure: the same plan
    stats = nd.cache_stats()
    assert (stats["hits"], stats["misses"], stats["compiles"], stats["plans"]) == (1, 1, 1, 1)
    nd.clear_cache()
    assert len(PLAN_CACHE) == 0 and nd.cache_stats()["hits"] == 0
    assert request(nodes, ins, outs, types) is not plan


def test_discard_forgets_a_plan_so_its_key_builds_anew():
    nodes, ins, outs, types = graph()
    plan = request(nodes, ins, outs, types)
    PLAN_CACHE.discard(plan)
    assert len(PLAN_CACHE) == 0
    assert request(nodes, ins, outs, types) is not plan


# ============================================================================================
# Keys
# ============================================================================================


def test_structure_types_outputs_and_plan_options_all_separate_plans():
    nodes, ins, outs, types = graph()
    base = request(nodes, ins, outs, types)
    others = [request(*graph("sub")),                                            # op
              request(nodes, ins, ["c", "d"], types),                            # outputs
              request(nodes, ins, outs, {**types, "a": TensorType((1,), F32.dtype)}),  # type
              request(nodes, ins, outs, types, exact_shapes=True),
              request(nodes, ins, outs, types, donate={"d": "a"})]
    renamed = [node("add", ("a", "b"), ("c",), name="renamed"), nodes[1]]
    others.append(request(renamed, ins, outs, types))  # errors name the node: part of the key
    assert len({id(p) for p in [base, *others]}) == 1 + len(others)
    assert len(PLAN_CACHE) == 1 + len(others)


def test_the_executor_and_the_planner_are_part_of_the_key(planner):
    nodes, ins, outs, types = graph()
    first = request(nodes, ins, outs, types)

    def other(nodes, ins, outs, types, **options):
        return InterpreterPlan(nodes, ins, outs, types)

    planner(other)
    second = request(nodes, ins, outs, types)
    assert second is not first
    previous = compiler.set_executor("compiled")  # (the planner here builds no kernels)
    try:
        assert request(nodes, ins, outs, types) not in (first, second)
    finally:
        compiler.set_executor(previous)
    set_planner(compiler.make_plan)
    assert request(nodes, ins, outs, types) is first  # the earlier planner's plan is still cached


def test_describe_key_change_names_the_part_that_changed():
    nodes, ins, outs, types = graph()
    key = structural_key(nodes, ins, outs, types)
    assert describe_key_change(key, structural_key(*graph("sub")[:3], types)) == "op sequence"
    wider = {**types, "b": TensorType((1,), F32.dtype)}
    assert describe_key_change(key, structural_key(nodes, ins, outs, wider)).startswith(
        "type of input 'b'")
    assert describe_key_change(key, structural_key(nodes, ins, ["c"], types)) == \
        "set of requested outputs"
    s1, s2 = (get_op("sum").make_attrs({"dims": (d,)}) for d in (0, 1))

    def trace_key(dims, dtype):  # a trace's key: one format with SameDiff's (shape classes)
        with nd.graph_scope() as scope:
            nd.create(np.ones((3, 4), dtype)).sum(dims)
        return scope._done.key(scope._out_slots)

    assert describe_key_change(trace_key(0, "f4"), trace_key(1, "f4")).startswith(
        "attributes of sum")
    assert describe_key_change(trace_key(0, "f4"), trace_key(0, "f8")) == \
        "type of input 0 (float32[?,?] -> float64[?,?]: the input dtype)"
    # keys of any other shape are tolerated
    assert describe_key_change("one", "two") == "plan key"
    assert describe_key_change((1, 2), (1, 3)) == "plan key"
    assert describe_key_change(None, ("a",)) == "plan key"
    wrapped = [cache.PlanKey(key, "interpreter", compiler.make_plan, exact, frozenset())
               for exact in (False, True)]
    assert describe_key_change(*wrapped) == "exact shapes"


def request_size(n: int, owner: str) -> None:
    nodes, ins, outs, types = graph()
    request(nodes, ins, outs, {**types, "a": TensorType((n,), F32.dtype)}, owner=owner)


def test_retrace_warning_for_an_owner_with_too_many_keys():
    for n in range(1, cache.RETRACE_LIMIT + 1):
        request_size(n, "my owner")
    with pytest.warns(RetraceWarning, match=r"my owner has compiled 9 .*type of input 'a'"):
        request_size(cache.RETRACE_LIMIT + 1, "my owner")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RetraceWarning)  # warned once per owner
        request_size(99, "my owner")


# ============================================================================================
# Fallback policy
# ============================================================================================


def test_a_failing_planner_falls_back_to_the_interpreter(planner, caplog):
    def broken(nodes, ins, outs, types, *, exact_shapes, donate):
        raise RuntimeError("no kernels today")

    planner(broken)
    with caplog.at_level("WARNING", logger="nd4py.plan"):
        plan = request(*graph(), exact_shapes=True, donate={"d": "a"})
    assert isinstance(plan, InterpreterPlan) and "no kernels today" in plan.reason
    np.testing.assert_array_equal(run(plan)[0], [6.0, 8.0, 10.0])
    assert nd.cache_stats()["fallbacks"] == 1
    assert any("no kernels today" in r.message for r in caplog.records)
    assert isinstance(build_plan(*graph()), InterpreterPlan)  # uncached, same policy


def test_strict_planner_errors_propagate_and_cache_nothing(planner):
    class Strict(RuntimeError):
        strict = True

    def strict(nodes, ins, outs, types, **options):
        raise Strict("compilation failed (strict)")

    planner(strict)
    with pytest.raises(Strict, match="strict"):
        request(*graph())
    with pytest.raises(Strict):
        build_plan(*graph())
    assert len(PLAN_CACHE) == 0 and nd.cache_stats()["fallbacks"] == 0


def test_type_inference_errors_are_the_callers_and_propagate():
    nodes, ins, outs, types = graph()

    def infer():
        raise nd.OpError("add: shapes (3,) and (4,) do not broadcast [in node 'add']")

    with pytest.raises(nd.OpError, match="in node 'add'"):
        get_plan(structural_key(nodes, ins, outs, types), nodes, ins, outs, infer)
    assert len(PLAN_CACHE) == 0 and nd.cache_stats()["fallbacks"] == 0
    calls = []

    def lazy():
        calls.append(1)
        return types

    key = structural_key(nodes, ins, outs, types)
    plan = get_plan(key, nodes, ins, outs, lazy)
    assert get_plan(key, nodes, ins, outs, lazy) is plan and calls == [1]  # only on a miss


# ============================================================================================
# Planner protocol
# ============================================================================================


def test_an_installed_planner_receives_exact_shapes_and_donate(planner):
    seen = []

    def recording(nodes, ins, outs, types, *, exact_shapes=False, donate=None):
        seen.append((exact_shapes, donate))
        return InterpreterPlan(nodes, ins, outs, types)

    planner(recording)
    request(*graph())
    request(*graph(), exact_shapes=True, donate={"d": "a"})
    assert seen == [(False, None), (True, {"d": "a"})]


def test_a_planner_without_the_keywords_is_refused():
    def old_style(nodes, ins, outs, types):
        return InterpreterPlan(nodes, ins, outs, types)

    with pytest.raises(nd.ConfigError, match="exact_shapes=False, donate=None"):
        set_planner(old_style)
    assert cache._planner is compiler.make_plan


# ============================================================================================
# Threads
# ============================================================================================


def test_threads_share_the_cache_without_losing_counts():
    keys = [structural_key(*graph()[:3], {**graph()[3], "a": TensorType((n,), F32.dtype)})
            for n in range(1, 9)]
    PLAN_CACHE.resize(6)  # evictions happen while threads race
    errors: list[BaseException] = []
    calls_per_thread = 200

    def work(seed: int) -> None:
        try:
            rng = np.random.default_rng(seed)
            for _ in range(calls_per_thread):
                n = int(rng.integers(len(keys)))
                nodes, ins, outs, types = graph()
                plan = get_plan(keys[n], nodes, ins, outs, types)
                assert plan.output_slots == ("d",)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    stats = PLAN_CACHE.stats
    assert stats.hits + stats.misses == 8 * calls_per_thread
    assert stats.compiles == stats.misses and len(PLAN_CACHE) <= 6
    assert stats.compiles - stats.evictions == len(PLAN_CACHE)


def test_a_key_being_built_is_waited_for_not_built_twice():
    """Two threads asking for one key: the second waits for the first's build and gets its
    plan; a failed build leaves the key to the next asker, who builds it."""
    pc = PlanCache(4)
    started, release = threading.Event(), threading.Event()
    builds: list[str] = []

    def slow_build():
        builds.append("first")
        started.set()
        release.wait(10)
        return SimpleNamespace(reason="")
    got = {}
    first = threading.Thread(target=lambda: got.setdefault("a", pc.get_or_build("k", slow_build)))
    first.start()
    started.wait(10)
    second = threading.Thread(target=lambda: got.setdefault("b", pc.get_or_build(
        "k", lambda: builds.append("second") or SimpleNamespace(reason=""))))
    second.start()
    second.join(0.2)
    assert second.is_alive()  # waiting for the first build, not building
    release.set()
    first.join(10)
    second.join(10)
    assert builds == ["first"] and got["a"] is got["b"]
    assert (pc.stats.misses, pc.stats.hits, pc.stats.compiles) == (1, 1, 1)

    def failing():
        raise RuntimeError("no plan")
    with pytest.raises(RuntimeError, match="no plan"):
        pc.get_or_build("bad", failing)
    plan = pc.get_or_build("bad", lambda: SimpleNamespace(reason=""))
    assert pc.get_or_build("bad", failing) is plan


def test_clear_cache_reaches_every_caller_of_the_one_plan_cache():
    """Traces, compiled functions, SameDiff.output and training steps all plan through the one
    cache: after nd.clear_cache() each of them builds its plans anew (counted as misses)."""
    import nd4py as nd
    from samediff.training import Sgd, TrainingConfig

    sd = nd.SameDiff.create()
    x = sd.placeholder("x", nd.DOUBLE, -1, 2)
    w = sd.var("w", np.ones((2, 1)))
    ((x.mmul(w) - 1.0) ** 2).mean().mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=Sgd(0.1), feature_mapping=["x"]))
    f = nd.compile(lambda a: a * 2.0)
    data = {"x": np.ones((4, 2))}

    def use_everything() -> None:
        sd.output(data, "w")
        sd.fit([data], epochs=1, verbose=0)
        f(nd.ones(3))
        with nd.graph_scope():
            nd.ones(2) + 1.0

    use_everything()
    nd.clear_cache()
    assert nd.cache_stats()["plans"] == 0
    use_everything()
    stats = nd.cache_stats()
    # output, the step's gradient and update plans, the compiled function, the scope
    assert stats["misses"] >= 5 and stats["plans"] >= 5, stats
