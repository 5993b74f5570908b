"""Fork safety (``samediff.kernels.forksafe``): ``os.fork`` while other threads convolve, multiply
and run dense layers; children that run kernels after the parent used them; a fork
multiprocessing pool after a parallel kernel.

A hang must fail, never block: every scenario runs in a subprocess of its own, in a new
session killed as a whole when its timeout passes, and each fork's child is waited for with
a deadline of its own.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pytest

from samediff.kernels import forksafe

needs_fork = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin",
                                reason="no os.fork (or fork is unsafe by default here)")

# Helpers the scenarios share: run ``fn`` in a forked child under a deadline.
_PRELUDE = textwrap.dedent("""
    import json, os, sys, threading, time
    import numpy as np
    import nd4py as nd

    def in_child(fn, deadline=10.0, after_fork=lambda: None):
        '''Fork; the child runs fn() -> bool and exits 0 (True) / 3 (False). 'ok', 'wrong',
        'died <signal>' or 'hung' (killed after the deadline).'''
        pid = os.fork()
        if pid == 0:
            try:
                good = fn()
            except BaseException as exc:
                print("child:", repr(exc), file=sys.stderr, flush=True)
                good = False
            os._exit(0 if good else 3)
        after_fork()
        killer = threading.Timer(deadline, os.kill, (pid, 9))  # a blocking wait gives the
        killer.start()  # busy threads the GIL and wakes as soon as the child exits
        status = os.waitpid(pid, 0)[1]
        killer.cancel()
        if os.WIFSIGNALED(status):
            return "hung" if os.WTERMSIG(status) == 9 else f"died {os.WTERMSIG(status)}"
        return "ok" if os.WEXITSTATUS(status) == 0 else "wrong"
""")

_THREADS = _PRELUDE + textwrap.dedent("""
    rng = np.random.default_rng(0)
    f32 = np.float32
    x = nd.array(rng.standard_normal((4, 8, 12, 12)).astype(f32))
    w = nd.array(rng.standard_normal((3, 3, 8, 8)).astype(f32))
    a = nd.array(rng.standard_normal((128, 96)).astype(f32))
    b = nd.array(rng.standard_normal((96, 128)).astype(f32))
    d = nd.array(rng.standard_normal((64, 256)).astype(f32))
    dw = nd.array(rng.standard_normal((256, 128)).astype(f32))
    xl = nd.array(rng.standard_normal((4, 16, 16, 32)).astype(f32))
    wl = nd.array(rng.standard_normal((3, 3, 32, 32)).astype(f32))
    work = {  # NCHW conv and 2-D matmul: the private BLAS, split over the helper thread;
        "conv": lambda: np.asarray(nd.conv2d(x, w, padding=(1, 1))),  # NHWC conv (per-tap
        "conv_nhwc": lambda: np.asarray(nd.conv2d(xl, wl, padding=(1, 1),  # route) and dense:
                                                  data_format="NHWC")),  # numpy's threaded GEMM
        "matmul": lambda: np.asarray(nd.matmul(a, b)),
        "dense": lambda: np.asarray(nd.nn.linear(d, dw)),
    }
    lanes = {"convolve": ("conv", "conv_nhwc"), "multiply": ("matmul", "dense")}
    # numpy's BLAS starts its pool again after every fork (10-80 ms here, in the parent and
    # in a child that uses it), so its kernels run around the first 10 forks only: before
    # the fork gate they hung the very first one every time
    on_numpy, mixed = {"conv_nhwc", "dense"}, [True]
    ref = {k: f() for k, f in work.items()}
    stop, busy = threading.Event(), threading.Event()
    laps = dict.fromkeys(lanes, 0)

    def loop(lane):
        while not stop.is_set():
            busy.wait()
            for k in lanes[lane]:
                if mixed[0] or k not in on_numpy:
                    work[k]()
            laps[lane] += 1

    threads = [threading.Thread(target=loop, args=(k,), daemon=True) for k in lanes]
    for t in threads:
        t.start()
    child = lambda keys: all(np.array_equal(work[k](), ref[k]) for k in keys)
    outcomes = []
    for i in range(int(sys.argv[1])):
        mixed[0] = i < 10
        # fork while both threads loop through their kernels; they pause while the child
        # runs (two cores: the child would otherwise wait for them)
        seen = dict(laps)
        busy.set()
        while any(laps[k] == seen[k] for k in lanes):
            time.sleep(0.0005)
        keys = list(work) if i in (0, 5) else ["conv", "matmul"]
        outcomes.append(in_child(lambda: child(keys), after_fork=busy.clear))
    before = dict(laps)
    busy.set()
    time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join(5.0)
    print(json.dumps({"outcomes": outcomes, "stuck": [k for k in lanes if laps[k] == before[k]],
                      "alive": sum(t.is_alive() for t in threads)}), flush=True)
    os._exit(0)
""")


def _run(script: str, *args: str, timeout: float = 60.0) -> dict:
    """Run ``script`` in a fresh interpreter and session; its last stdout line is JSON. A
    hang (the parent stuck in fork, or at exit) kills the whole session and fails."""
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"hung for {timeout} s (a fork or a kernel never returned); "
                    f"stdout: {out[-500:]!r} stderr: {err[-2000:]!r}")
    assert proc.returncode == 0, f"exit {proc.returncode}; stderr: {err[-3000:]}"
    return json.loads(out.strip().splitlines()[-1])


@needs_fork
def test_fork_while_threads_convolve_multiply_and_run_dense_layers():
    """A thread convolving (NCHW on the private BLAS with the helper, NHWC on numpy's
    threaded GEMM) and one multiplying (a 2-D matmul on the private BLAS, a dense layer on
    numpy's) while the main thread forks 50 times: every child computes the same numbers, no
    fork and no parent thread hangs. Before the fork gate every run hung (alone, the NHWC
    convolution and the dense layer each hung the first child and their own thread)."""
    got = _run(_THREADS, "50")
    assert got["outcomes"] == ["ok"] * 50, got["outcomes"]
    assert got["stuck"] == [] and got["alive"] == 0, got


_CHILDREN = _PRELUDE + textwrap.dedent("""
    import multiprocessing as mp
    from samediff.kernels import blas
    from samediff.training.finite import all_finite

    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 10, 10)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    a = rng.standard_normal((96, 64)).astype(np.float32)
    big = np.ones(1 << 20, np.float32)  # all_finite and the plan go parallel at this size

    @nd.compile
    def shifted(v):
        return nd.exp(v) * 2.0 + 1.0

    def job(k):
        return (np.asarray(nd.conv2d(nd.array(x), nd.array(w))),
                np.asarray(nd.matmul(nd.array(a), nd.array(a.T))),
                bool(all_finite(big)), float(np.asarray(shifted(nd.array(big))).sum()))

    shifted(nd.array(big[:8]))  # the plan is built here (its serial kernel only)
    assert all_finite(big)  # checked in halves: the helper thread starts in the parent
    ref = job(0)[:2]
    with mp.get_context("fork").Pool(2) as pool:
        outs = pool.map_async(job, range(4)).get(30)
    got = {"same": [np.array_equal(o[0], ref[0]) and np.array_equal(o[1], ref[1])
                    for o in outs],
           "finite": [o[2] for o in outs], "sums": [o[3] for o in outs]}

    # a thread caught loading the private BLAS (its lazy-load lock held) at the fork
    blas._WHY_NOT = None  # as before the first use: the next caller loads the library
    held, release = threading.Event(), threading.Event()

    def loader():
        with blas._LOADING:
            held.set()
            release.wait()

    threading.Thread(target=loader, daemon=True).start()
    held.wait()
    # (a hang is forever; 20 s leaves room for a child loading the library on a machine whose
    # cores the rest of the suite keeps busy -- 5 s was once exceeded at the end of a CI run)
    got["loading"] = in_child(lambda: blas.why_not() == "" and blas.available(), deadline=20.0)
    release.set()
    print(json.dumps(got), flush=True)
    os._exit(0)
""")


@pytest.fixture(scope="module")
def children():
    """One interpreter for the child scenarios below (its start-up is most of their cost)."""
    return _run(_CHILDREN, timeout=90.0)


@needs_fork
def test_fork_pool_after_kernels_and_a_parallel_kernel(children):
    """multiprocessing's fork start method after a convolution, a matmul and a kernel split
    over two threads ran in the parent: the workers convolve, multiply, check finiteness and
    run a compiled plan big enough to split, with the parent's numbers. (When those splits
    were Numba ``prange`` loops, Numba killed every worker that used the inherited GNU OpenMP
    pool -- "fork() called from a process already using GNU OpenMP" -- and the pool waited
    forever.)"""
    assert children["same"] == [True] * 4 and children["finite"] == [True] * 4, children
    expected = float((1 << 20) * (2.0 * 2.718281828459045 + 1.0))
    assert all(abs(s - expected) <= 1e-5 * expected for s in children["sums"]), children


@needs_fork
def test_child_loads_the_private_blas_while_a_parent_thread_was_loading_it(children):
    """The lazy-loading lock held by a parent thread at fork time must not hang the child's
    first BLAS call (before: the child waited forever for a thread it does not have)."""
    assert children["loading"] == "ok", children


# -- the gate itself, in this process (no fork: its handlers are called directly) ----------

def _start(target) -> threading.Thread:
    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t


def test_fork_handler_waits_for_kernels_in_flight_and_holds_new_ones():
    inside, finish = threading.Event(), threading.Event()
    ran: list[str] = []

    @forksafe.guarded
    def kernel(name, block):
        ran.append(name)
        inside.set()
        if block:
            assert finish.wait(5.0)

    first = _start(lambda: kernel("first", True))
    assert inside.wait(5.0) and forksafe.in_flight() == 1
    forking = _start(forksafe._before_fork)
    try:  # whatever fails, the pending "fork" ends (else every later kernel here would wait)
        time.sleep(0.05)
        assert forking.is_alive(), "the fork went on while a kernel was in flight"
        finish.set()
        forking.join(5.0)
        first.join(5.0)
        assert not forking.is_alive() and forksafe.in_flight() == 0
        later = _start(lambda: kernel("during the fork", False))
        time.sleep(0.05)
        assert later.is_alive() and ran == ["first"], "a kernel started during the fork"
    finally:
        finish.set()
        forking.join(15.0)
        forksafe._after_fork_in_parent()
    later.join(5.0)
    assert ran == ["first", "during the fork"] and forksafe.in_flight() == 0


def test_nested_and_failing_kernels_count_once_and_leave():
    seen = []

    @forksafe.guarded
    def inner():
        seen.append(forksafe.in_flight())
        raise KeyError("boom")

    @forksafe.guarded
    def outer():
        seen.append(forksafe.in_flight())
        inner()

    with pytest.raises(KeyError):
        outer()
    assert seen == [1, 1] and forksafe.in_flight() == 0


def test_fork_handler_gives_up_after_wait_s_with_a_warning(monkeypatch):
    finish = threading.Event()
    stuck = _start(forksafe.guarded(lambda: finish.wait(5.0)))
    end = time.monotonic() + 5.0
    while forksafe.in_flight() == 0 and time.monotonic() < end:
        time.sleep(0.001)
    monkeypatch.setattr(forksafe, "WAIT_S", 0.05)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            forksafe._before_fork()
    finally:
        forksafe._after_fork_in_parent()
        finish.set()
        stuck.join(5.0)
    assert any("still running" in str(w.message) for w in caught), caught
    assert forksafe.in_flight() == 0


def test_the_kernel_drivers_that_call_a_blas_are_guarded():
    """The drivers that may call a BLAS (ours or numpy's threaded one) or hand work to the
    helper, each marked ``guarded``. A decorator left on a helper function inserted above
    ``cnn.conv`` once left the convolution unguarded: a fork during its per-tap GEMMs on
    numpy's pool then hung the parent (the scenario above, in 3 runs of 4)."""
    from samediff.kernels import cnn, compiling, recurrent
    from samediff.ops import attention, cnn_depthwise, linalg, nn
    from samediff.ops import recurrent as recurrent_ops
    drivers = [cnn.conv, cnn.conv_input_grad, cnn.conv_weight_grad, recurrent.forward,
               recurrent.backward, recurrent_ops._forward, recurrent_ops._backward,
               linalg._matmul, linalg._tensor_mmul, nn._linear, compiling._run,
               cnn_depthwise.depthwise_input_grad, cnn_depthwise.depthwise_weight_grad,
               attention._sdpa, attention._sdpa_backward]
    assert [d.__name__ for d in drivers if not forksafe.is_guarded(d)] == []
