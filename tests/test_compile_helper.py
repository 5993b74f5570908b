"""A new plan's kernels compile on two cores: this process from the front of the plan, a helper
process from the back (``samediff/compiler/compile_helper.py``). Every step is still warmed up
here, in order, so results are bit for bit those of a one-process compile; a helper that fails,
dies or hangs only means this process compiles more itself."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from samediff.compiler import compile_helper

pytestmark = pytest.mark.compiled
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class FakeHelper:
    """Compiles by sleeping; records when each job ended; fails the jobs in ``fail``."""

    def __init__(self, fail=(), seconds=0.02):
        self.prelude, self.fail, self.seconds = [], set(fail), seconds
        self.ended: dict = {}
        self.sent: list = []
        self.closed = False

    def compile(self, job):
        self.sent.append(job)
        time.sleep(self.seconds)
        self.ended[job] = time.perf_counter()
        return job not in self.fail

    def close(self):
        self.closed = True


def _run(jobs, helper, here_seconds=0.02, warmups=()):
    started: dict = {}
    order: list = []

    def here(k):
        started[k] = time.perf_counter()
        order.append(k)
        time.sleep(here_seconds)
    compile_helper._two_ended(jobs, [k for k, j in enumerate(jobs) if j is not None],
                              list(warmups), helper, here)
    return order, started


def test_every_step_is_warmed_up_here_in_order_after_the_helper_finished_it():
    jobs = [f"job{k}" for k in range(8)]
    helper = FakeHelper()
    order, started = _run(jobs, helper)
    assert order == list(range(8))
    assert helper.ended, "the helper took none of the steps"
    assert "job0" not in helper.ended  # this process takes the front
    for job, ended in helper.ended.items():  # the helper's steps load after it compiled them
        assert started[jobs.index(job)] >= ended


def test_steps_with_nothing_to_compile_are_not_sent_to_the_helper():
    jobs = [None, "job1", None, "job3", None, "job5"]
    helper = FakeHelper()
    order, _ = _run(jobs, helper)
    assert order == list(range(6))
    assert set(helper.ended) <= {"job1", "job3", "job5"}


def test_a_failing_helper_leaves_its_steps_to_this_process():
    jobs = [f"job{k}" for k in range(6)]
    helper = FakeHelper(fail={"job5"})
    order, _ = _run(jobs, helper)
    assert order == list(range(6))
    assert list(helper.ended) == ["job5"]  # it stops taking steps after a failure


def test_a_hung_helper_is_closed_and_its_step_compiled_here(monkeypatch):
    monkeypatch.setattr(compile_helper, "JOB_TIMEOUT", 0.2)
    release = threading.Event()

    class Hung(FakeHelper):
        def compile(self, job):
            release.wait(5)
            return False

        def close(self):
            super().close()
            release.set()
    helper = Hung()
    jobs = ["job0", "job1", "job2"]
    order, _ = _run(jobs, helper, here_seconds=0.0)
    assert order == [0, 1, 2] and helper.closed


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_the_helper_process_answers_a_bad_job_with_a_failure_and_keeps_serving(method,
                                                                                monkeypatch):
    monkeypatch.setenv("ND4PY_COMPILE_HELPER_START", method)
    helper = compile_helper._Helper()
    try:
        assert helper.started == compile_helper.start_method()
        assert helper.pid != os.getpid()
        helper.prelude.clear()
        assert not helper.compile(("def kernel(:\n", "kernel", ()))
        assert helper.alive()
        assert helper.compile(("warm", "samediff.kernels.finite", "_warm",
                               ("finite", "float32")))
    finally:
        helper.close()
    assert not helper.alive()


@pytest.mark.skipif(compile_helper.start_method() != "fork", reason="helpers are spawned here")
def test_no_fork_while_another_thread_compiles():
    """A thread inside a Numba compile holds its lock: a fork would leave the child that lock
    held for good, so the helper is a fresh interpreter then."""
    from numba.core.compiler_lock import global_compiler_lock
    holding, release = threading.Event(), threading.Event()

    def compiling():
        with global_compiler_lock:
            holding.set()
            release.wait(30)
    other = threading.Thread(target=compiling)
    other.start()
    holding.wait(30)
    try:
        helper = compile_helper._Helper()
    finally:
        release.set()
        other.join()
    try:
        assert helper.started == "spawn"
        helper.prelude.clear()
        assert helper.compile(("warm", "samediff.kernels.finite", "_warm", ("finite", "float32")))
    finally:
        helper.close()
    assert not helper.alive()


CHILD = """
import json, sys
import numpy as np
import nd4py as nd
from samediff.compiler.plan import KernelStep

@nd.compile
def f(x, w):
    h = nd.math.tanh(x * 1.5 + 0.25)
    s = nd.nn.softmax(h @ w, -1)
    z = nd.math.exp(s * -2.0) * x.sum(-1, keepdims=True)
    return nd.nn.gelu(z @ w - 0.5).sum(-1)

rng = np.random.default_rng(0)
x = nd.create(rng.random((8, 16), dtype=np.float32))
w = nd.create(rng.random((16, 16), dtype=np.float32))
out = f(x, w).numpy()
kernels = sum(isinstance(s, KernelStep) and s.kernels is not None for s in f.last_plan.steps)
print(json.dumps({"out": out.view(np.uint32).tolist(), "kernels": kernels,
                  "stats": nd.cache_stats()}))
"""


@pytest.mark.heavy(seconds=8)
def test_a_plan_compiled_with_the_helper_gives_the_same_bits(tmp_path):
    got = {}
    for helper in ("1", "0"):
        cache = tmp_path / helper
        env = dict(os.environ, ND4PY_COMPILE_HELPER=helper, ND4PY_CACHE_DIR=str(cache),
                   NUMBA_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join(
                       p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
        env.pop("ND4PY_EXECUTOR", None)
        out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                             text=True, cwd=ROOT)
        assert out.returncode == 0, out.stderr[-3000:]
        got[helper] = json.loads(out.stdout.strip().splitlines()[-1])
    with_helper, alone = got["1"], got["0"]
    assert with_helper["kernels"] == alone["kernels"] >= compile_helper.MIN_COLD
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if cores >= 2:
        assert with_helper["stats"]["helper_compiles"] >= 1
    assert alone["stats"]["helper_spawns"] == 0
    assert with_helper["out"] == alone["out"]
    assert np.isfinite(np.array(alone["out"], np.uint32).view(np.float32)).all()


def test_steps_with_the_same_kernel_are_one_job_compiled_once():
    jobs = ["a", "b", "a", "c", "b", "a"]
    helper = FakeHelper()
    order, started = _run(jobs, helper)
    assert order == list(range(6))
    assert helper.sent and len(helper.sent) == len(set(helper.sent))
    for job, ended in helper.ended.items():  # every step of a helper's job waited for it
        assert all(started[k] >= ended for k, j in enumerate(jobs) if j == job)


def test_the_helper_takes_the_plans_warm_ups_first_and_this_process_the_rest(monkeypatch):
    ran_here: list = []
    monkeypatch.setattr(compile_helper, "warm_here", ran_here.append)
    monkeypatch.setattr(compile_helper, "_warmed", set())
    warmups = [("m", "f", ("a", "float32")), ("m", "f", ("b", "float32"))]
    helper = FakeHelper(seconds=0.05)
    order, _ = _run(["k0", "k1"], helper, here_seconds=0.0, warmups=warmups)
    assert order == [0, 1]
    assert helper.sent[0] == ("warm", *warmups[0])  # before any kernel
    # each warm-up ran exactly once, in the helper or (what it had not started) here
    sent = [j[1:] for j in helper.sent if j[0] == "warm"]
    assert sorted(sent + ran_here) == sorted(warmups)
    assert compile_helper._warmed == set(warmups)  # never sent again in this process


def test_op_warm_ups_name_the_kernels_their_steps_will_run():
    from samediff.ops import registry
    from samediff.ops.registry import TensorType
    f32 = np.dtype(np.float32)
    matmul = registry.get_op("matmul")
    attrs = matmul.default_attrs
    big = [TensorType((512, 512), f32), TensorType((512, 512), f32)]
    small = [TensorType((2, 3), f32), TensorType((3, 4), f32)]
    stack = [TensorType((8, 4, 128, 64), f32), TensorType((8, 4, 64, 128), f32)]
    assert matmul.warm(small, attrs) == ()
    if matmul.warm(big, attrs):  # (none without the private BLAS)
        assert matmul.warm(big, attrs)[0][1:] == ("_warm", ("matmul", "float32"))
        assert matmul.warm(stack, attrs)[0][1:] == ("_warm", ("matmul", "float32"))
    lstm = registry.get_op("lstm_layer")
    la = lstm.default_attrs
    x, W, R = (TensorType(s, f32) for s in ((32, 32, 64), (64, 512), (128, 512)))
    assert lstm.warm([x, W, R], la) == (("samediff.kernels.recurrent", "_warm_forward",
                                         ("lstm", "float32")),)
    assert registry.get_op("lstm_layer_grad").warm([x, W, R], la)[0][1] == "_warm_backward"
    f64 = [TensorType(t.shape, np.dtype(np.float64)) for t in (x, W, R)]
    assert lstm.warm(f64, la) == ()  # float64 LSTMs take numpy's route: nothing to warm
    tiny = [TensorType((32, 1, 64), f32), W, TensorType((8, 32), f32)]
    assert lstm.warm(tiny, la) == ()  # below KERNEL_MIN_WORK


def test_convolution_and_pooling_warm_ups_follow_the_route_they_will_take():
    from samediff.ops import registry
    from samediff.ops.registry import TensorType
    f32 = np.dtype(np.float32)

    def t(*shape):
        return TensorType(shape, f32)
    conv = registry.get_op("conv2d")
    a = conv.make_attrs({"data_format": "NCHW", "weights_format": "HWIO"})
    # LeNet's first layer: one input channel, im2col on every op
    x, w, g = t(32, 1, 28, 28), t(5, 5, 1, 6), t(32, 6, 24, 24)
    assert conv.warm([x, w], a) == (("samediff.kernels.cnn", "_warm_conv",
                                     ("im2col", "float32")),)
    assert registry.get_op("conv2d_input_grad").warm([g, w, x], a)[0][1] == "_warm_input_grad"
    assert registry.get_op("conv2d_weight_grad").warm([x, g, w], a)[0][1:] == (
        "_warm_weight_grad", ("im2col", "float32"))
    # OIHW weights are read as HWIO; NHWC convolutions take numpy's per-tap GEMMs: none
    oihw = conv.make_attrs({"data_format": "NCHW", "weights_format": "OIHW"})
    assert conv.warm([x, t(6, 1, 5, 5)], oihw) == conv.warm([x, w], a)
    nhwc = conv.make_attrs({"data_format": "NHWC", "weights_format": "HWIO"})
    assert conv.warm([t(32, 28, 28, 1), w], nhwc) == ()
    assert conv.warm([TensorType((-1, 1, 28, 28), f32), w], a) == ()  # a batch not known yet
    pool = registry.get_op("max_pooling2d")
    pa = pool.make_attrs({"kernel": (2, 2), "stride": (2, 2), "data_format": "NCHW"})
    assert pool.warm([g], pa)[0][1:] == ("_warm_pool_forward", ("pool2x2", "float32"))
    assert registry.get_op("max_pooling2d_grad").warm([g, t(32, 6, 12, 12)], pa)[0][1] == "_warm"


def test_a_training_steps_two_plans_compile_as_one_pool(monkeypatch):
    """The gradient plan and the update plan of a training step hand their kernels to one
    compile (``together``): the update's kernels no longer wait for the gradients' pool to end
    and then compile on their own."""
    import nd4py as nd
    from samediff import SameDiff
    from samediff.training import TrainingConfig
    from samediff.training.updaters import Sgd
    pools: list = []
    real = compile_helper._compile_all

    def record(jobs, here, warmups):
        pools.append(len(jobs))
        real(jobs, here, warmups)
    monkeypatch.setattr(compile_helper, "_compile_all", record)
    rng = np.random.default_rng(0)
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.FLOAT, -1, 6)
    y = sd.placeholder("y", nd.FLOAT, -1, 3)
    w = sd.var("w", rng.normal(size=(6, 3)).astype(np.float32))
    b = sd.var("b", np.zeros(3, np.float32))
    d = (x.mmul(w) + b).tanh() - y
    (d * d).mean().mark_as_loss()
    sd.set_training_config(TrainingConfig(updater=Sgd(0.1), feature_mapping=["x"],
                                          label_mapping=["y"]))
    xs = rng.normal(size=(16, 6)).astype(np.float32)
    ys = rng.normal(size=(16, 3)).astype(np.float32)
    sd.fit((xs, ys), epochs=3, batch_size=16, shuffle=False, verbose=0)
    assert len(pools) == 1 and pools[0] >= 2  # both plans' kernels, in one call
    from samediff.compiler.plan import KernelStep
    from samediff.training.trainer import train_step_for
    (plan,) = train_step_for(sd, sd.training_config, ())._plans.values()
    steps = [s for p in (plan.gradients, plan.update) for s in p.steps
             if isinstance(s, KernelStep)]
    assert len(steps) == pools[0] and all(s.kernels is not None for s in steps)


def _chain(size, *ops):
    """Nodes applying ``ops`` in turn to float32 ``a`` of ``size`` elements (a binary op
    also reads ``a``), and every value's type: ``(nodes, types, last value)``."""
    from samediff.ops import TensorType, get_op
    from types import SimpleNamespace as Node
    t = TensorType((size,), np.dtype("float32"))
    nodes, value = [], "a"
    for k, name in enumerate(ops):
        op = get_op(name)
        ins = (value,) if len(op.inputs) == 1 else (value, "a")
        nodes.append(Node(name=f"n{k}", op=op, attrs=op.default_attrs, inputs=ins,
                          outputs=(f"v{k}",)))
        value = f"v{k}"
    return nodes, {"a": t, **{n.outputs[0]: t for n in nodes}}, value


def test_a_plan_run_inside_together_compiles_the_pool_first():
    """Running a plan before its ``together()`` block ends compiles the block's pool then
    (this thread); a plan made after that joins a new pool, which the block's end compiles."""
    from samediff.compiler.cache import build_plan
    from samediff.compiler.plan import CompiledPlan
    nodes, types, out = _chain(5, "exp", "mul")
    a = np.linspace(-2, 2, 5, dtype=np.float32)
    with compile_helper.together():
        plan = build_plan(nodes, ["a"], [out], types, exact_shapes=True)
        assert isinstance(plan, CompiledPlan) and not plan._ready.is_set()
        got = plan.execute([a])[0]
        assert plan._ready.is_set()
        late = build_plan(nodes, ["a"], [out], types, exact_shapes=True)
        assert not late._ready.is_set()
    assert late._ready.is_set()
    assert got.tobytes() == late.execute([a])[0].tobytes()
    np.testing.assert_allclose(got, np.exp(a.astype(np.float64)) * a, rtol=1e-6)


def test_a_plan_another_thread_runs_waits_for_the_pool():
    from samediff.compiler.cache import build_plan
    nodes, types, out = _chain(4, "neg")
    a = np.arange(4, dtype=np.float32)
    results: list = []
    with compile_helper.together():
        plan = build_plan(nodes, ["a"], [out], types, exact_shapes=True)
        runner = threading.Thread(target=lambda: results.append(plan.execute([a])[0]))
        runner.start()
        runner.join(0.3)
        assert runner.is_alive() and not results  # waiting for the block to end
    runner.join(30)
    assert results and results[0].tolist() == [-0.0, -1.0, -2.0, -3.0]


class _Cut(BaseException):
    """Stands for Ctrl-C (or a strict-mode error) in the middle of a pooled compile."""


def test_a_pooled_compile_cut_short_caches_no_plan(monkeypatch):
    """Plans made in a ``together()`` block are cached when their kernels are compiled: a
    compile cut short leaves nothing half-built in the plan cache, so the next call builds
    and compiles afresh (before pooling, such a plan was never cached either)."""
    from samediff.compiler.cache import PLAN_CACHE, get_plan
    nodes, types, out = _chain(6, "tanh", "sub")
    key = ("a pooled compile cut short", object())
    real = compile_helper._compile_all

    def cut(jobs, here, warmups):
        raise _Cut()
    monkeypatch.setattr(compile_helper, "_compile_all", cut)
    with pytest.raises(_Cut):
        with compile_helper.together():
            get_plan(key, nodes, ["a"], [out], types, exact_shapes=True)
    assert key not in {k.key for k in PLAN_CACHE._plans}
    monkeypatch.setattr(compile_helper, "_compile_all", real)
    plan = get_plan(key, nodes, ["a"], [out], types, exact_shapes=True)
    assert plan.kind == "compiled" and not plan.reason
    assert all(s.kernels is not None for s in plan.steps if hasattr(s, "kernels"))
    a = np.linspace(-1, 1, 6, dtype=np.float32)
    np.testing.assert_allclose(plan.execute([a])[0], np.tanh(a) - a, rtol=1e-6, atol=1e-7)


def test_the_same_plan_asked_twice_in_one_block_does_not_wait_for_itself():
    from samediff.compiler.cache import get_plan
    nodes, types, out = _chain(3, "exp")
    key = ("asked twice in one block", object())
    with compile_helper.together():
        first = get_plan(key, nodes, ["a"], [out], types, exact_shapes=True)
        again = get_plan(key, nodes, ["a"], [out], types, exact_shapes=True)
    assert again is first and first._ready.is_set()


@pytest.mark.skipif(compile_helper.start_method() != "fork", reason="helpers are spawned here")
def test_a_forked_helper_lets_go_of_the_parents_files_and_signal_handlers(tmp_path):
    """The helper must not keep a pipe (socket, lock file) of its parent's open after the
    parent closes it, nor run the parent's Python signal handlers."""
    import select
    import signal
    r, w = os.pipe()
    ran: list = []
    previous = signal.signal(signal.SIGUSR1, lambda *a: ran.append(1))
    try:
        helper = compile_helper._Helper()
        try:
            assert helper.started == "fork"
            os.close(w)
            assert select.select([r], [], [], 5)[0] and os.read(r, 1) == b""  # end of file now
            os.kill(helper.pid, signal.SIGUSR1)  # the default action: it ends
            deadline = time.monotonic() + 10
            while helper.alive() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert not helper.alive() and not ran
        finally:
            helper.close()
    finally:
        signal.signal(signal.SIGUSR1, previous)
        os.close(r)


def test_a_pool_leaves_old_objects_out_of_collections_and_thaws_them_after():
    """While a pool compiles, the objects alive before it are frozen out of the garbage
    collector's passes (fewer full collections over the whole process); after, they are
    thawed. Objects someone froze before stay frozen (thawing would thaw theirs too)."""
    import gc
    if gc.get_freeze_count():
        pytest.skip("something in this process froze objects already")
    with compile_helper._old_objects_left_out():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        with compile_helper._old_objects_left_out():
            pass
        # (a count, not the same count: frozen objects are still freed when unreferenced)
        assert gc.get_freeze_count() > 0, "the pool thawed objects it had not frozen"
    finally:
        gc.unfreeze()
