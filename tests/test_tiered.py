"""Tiered execution (``samediff/compiler/tiered.py``): in ``"background"`` mode a new plan answers
from the interpreter at once and its compiled form swaps in when built; ``"sync"`` callers never
see a plan still compiling; a failed build keeps the interpreter; threads and fork are safe.

The build is held back by a planner that waits on an event, so every test decides when the
compile "finishes" — nothing here depends on timing.
"""
from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np
import pytest
from tracing_support import isolated_plan_cache  # noqa: F401  (every test: an empty cache)

import nd4py as nd
from samediff.compiler import make_plan, tiered
from samediff.compiler.cache import set_planner
from samediff.errors import ConfigError
from samediff.interpreter import InterpreterPlan

pytestmark = pytest.mark.compiled  # (the suite's default executor is the interpreter)

X = np.arange(12, dtype=np.float32).reshape(3, 4)


class HeldPlanner:
    """``make_plan``, but each build waits until ``release()`` (or raises, if told to)."""

    def __init__(self, fail: bool = False) -> None:
        self.gate, self.fail, self.builds = threading.Event(), fail, 0
        self.entered = threading.Event()  # a build is in progress (waiting at the gate)

    def __call__(self, *args, **options):
        self.entered.set()
        assert self.gate.wait(30), "the test never released the build"
        self.builds += 1
        if self.fail:
            raise RuntimeError("the compiler declined (test)")
        return make_plan(*args, **options)

    def release(self) -> None:
        self.gate.set()


@pytest.fixture
def held():
    planner = HeldPlanner()
    previous = set_planner(planner)
    try:
        yield planner
    finally:
        planner.release()
        set_planner(previous)


def f(x):
    return (x * 2.0 + 1.0) * x  # exact ops: both tiers give the same bits


def want():
    return (X * np.float32(2.0) + np.float32(1.0)) * X


def test_background_answers_from_the_interpreter_then_swaps_in(held):
    compiled = nd.compile(f)
    with nd.compile_mode("background"):
        first = compiled(nd.create(X))  # the build is held: this ran interpreted
        plan = compiled.last_plan
        assert plan.kind == "tiered" and not plan.compiled
        assert isinstance(plan.active, InterpreterPlan)
        assert "compiling in the background" in plan.explain()
        assert nd.cache_stats()["tiered_compiling"] >= 1
        held.release()
        assert plan.wait(30)
        second = compiled(nd.create(X))
    assert plan.active.kind == "compiled" and "swapped in after" in plan.explain()
    np.testing.assert_array_equal(first.numpy(), want())
    np.testing.assert_array_equal(second.numpy(), first.numpy())  # identical either way


def test_a_failed_build_keeps_running_interpreted_and_says_why():
    planner = HeldPlanner(fail=True)
    previous = set_planner(planner)
    try:
        with nd.compile_mode("background"), nd.graph_scope() as scope:
            y = nd.create(X) * 3.0
        planner.release()
        assert scope.plan.wait(30)
        assert isinstance(scope.plan.active, InterpreterPlan)
        assert "declined" in scope.plan.active.reason and "declined" in scope.plan.reason
        np.testing.assert_array_equal(y.numpy(), X * np.float32(3.0))
        with nd.compile_mode("background"), nd.graph_scope() as again:
            z = nd.create(X) * 3.0  # the same plan, from the cache, still interpreted
        assert again.plan is scope.plan and z.numpy().tolist() == y.numpy().tolist()
    finally:
        planner.release()
        set_planner(previous)


def test_threads_calling_across_the_swap_all_get_right_results(held):
    compiled = nd.compile(f)
    errors, results = [], []

    def caller():
        try:
            with nd.compile_mode("background"):
                for _ in range(40):
                    results.append(compiled(nd.create(X)).numpy())
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=caller) for _ in range(3)]
    for t in threads:
        t.start()
    held.release()  # the swap happens while they call
    for t in threads:
        t.join(60)
    assert not errors and len(results) == 120
    for r in results:
        np.testing.assert_array_equal(r, want())
    plan = compiled.last_plan
    assert plan.wait(30) and plan.active.kind == "compiled"


def test_a_sync_caller_waits_for_a_plan_building_in_the_background(held):
    with nd.compile_mode("background"), nd.graph_scope() as first:
        y0 = nd.create(X) * 5.0
    assert not first.plan.compiled
    threading.Timer(0.2, held.release).start()
    with nd.graph_scope() as second:  # sync (the default): gets the same plan, compiled
        y = nd.create(X) * 5.0
    assert second.plan is first.plan and first.plan.compiled
    assert first.plan.active.kind == "compiled"
    np.testing.assert_array_equal(y.numpy(), X * np.float32(5.0))
    np.testing.assert_array_equal(y0.numpy(), y.numpy())


def test_interpret_mode_never_compiles_and_has_plans_of_its_own(held):
    held.release()
    with nd.compile_mode("interpret"), nd.graph_scope() as a:
        ya = nd.create(X) + 1.0
    with nd.graph_scope() as b:
        yb = nd.create(X) + 1.0
    np.testing.assert_array_equal(ya.numpy(), yb.numpy())
    assert a.plan.kind == "interpreter" and b.plan.kind == "compiled" and held.builds == 1


def test_modes_are_checked():
    with pytest.raises(ConfigError, match="background"):
        nd.set_compile_mode("later")
    with pytest.raises(ConfigError, match="sync"):
        with nd.compile_mode("eventually"):
            pass
    assert nd.get_compile_mode() == "sync"


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs fork")
def test_fork_waits_for_a_build_in_progress_and_the_child_runs_the_plan(held):
    compiled = nd.compile(f)
    with nd.compile_mode("background"):
        compiled(nd.create(X))
    plan = compiled.last_plan
    assert held.entered.wait(30)  # the build is in progress (queued ones restart in a child)
    threading.Timer(0.3, held.release).start()  # the fork below waits for this build
    pid = os.fork()
    if pid == 0:  # the child: the swapped-in plan runs here
        code = 0
        try:
            ok = plan.compiled and np.array_equal(compiled(nd.create(X)).numpy(), want())
            code = 0 if ok else 3
        except BaseException:  # noqa: BLE001
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert plan.compiled and tiered.stats()["tiered_compiling"] == 0


def test_the_gil_switches_often_while_the_compile_thread_works():
    """Numba compiles in Python, holding the GIL: while compile jobs run the switch interval is
    ``COMPILING_SWITCH_S`` (the plans' thread gets the GIL back soon after each numpy call),
    and the previous one is restored when the queue drains."""
    from samediff.kernels import compiling
    deadline = time.monotonic() + 30
    while compiling.pending() and time.monotonic() < deadline:  # (an earlier test's jobs:
        time.sleep(0.001)  # the interval is theirs while they run)
    before = sys.getswitchinterval()
    seen, done = [], threading.Event()
    compiling.submit(lambda: seen.append(sys.getswitchinterval()))
    compiling.submit(done.set)
    assert done.wait(10)
    deadline = time.monotonic() + 10
    while compiling.pending() and time.monotonic() < deadline:
        time.sleep(0.001)
    assert seen == [min(before, compiling.COMPILING_SWITCH_S)]
    assert sys.getswitchinterval() == before


EXIT_CHILD = """
import sys, time
from samediff.kernels import compiling
out = sys.argv[1]

def running():
    time.sleep(0.5)  # (a compile in LLVM, as far as the exit is concerned)
    open(out + "/ran", "w").close()

def queued():
    open(out + "/queued", "w").close()
compiling.submit(running)
compiling.submit(queued)
time.sleep(0.1)  # exits with the first job running and the second queued
"""


def test_an_exit_waits_for_the_compile_in_progress_and_drops_the_queued_ones(tmp_path):
    """A daemon compile thread still inside LLVM while the process's exit handlers ran
    aborted the process (SIGABRT in MCJIT, 1 exit in 5-10 of a background-mode script)."""
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run([sys.executable, "-c", EXIT_CHILD, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "ran").exists()
    assert not (tmp_path / "queued").exists()
