"""Work stealing in the helper hand-off (``samediff.kernels.workers``): the second half of a
split is run by whichever thread claims it first -- the helper, or the caller once its own
half is done -- exactly once, never both, never neither, whatever the timing (a helper
delayed before or after its claim, a caller that sleeps while waiting), and a stolen half
computes the same bits as a helper's or a serial run."""
from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest

from samediff.kernels import matmul as M
from samediff.kernels import spin, workers

pytestmark = pytest.mark.skipif(not workers.enabled(), reason="one CPU or ND4PY_WORKERS=1")


_IDLE = np.zeros(1, np.int64)


def _spin_for(us: float) -> None:
    """Busy ``us`` microseconds without the GIL, as a nogil kernel half is."""
    spin.spin_until(_IDLE, 0, 1, int(us * 1000 / spin.ns_per_spin()))


@pytest.fixture
def delayed_helper(monkeypatch):
    """The helper pauses a random while just before it looks for a go (``"before"``: it
    may see the go late, after the caller took the half back) or just after it won a
    claim (``"after"``) -- as if descheduled by a busy machine at the worst moment; the
    caller's claims are untouched. Yields a dict to set the mode in."""
    real = spin.await_claim
    mode = {"where": "before", "rng": random.Random(0)}

    def await_claim(flags, index, seen, claim_index, spins, *rest):
        if mode["where"] == "before":
            _pause(mode["rng"])
        got = real(flags, index, seen, claim_index, spins, *rest)
        if got > 0 and mode["where"] == "after":
            _pause(mode["rng"])
        return got
    monkeypatch.setattr(spin, "await_claim", await_claim)
    workers.both(lambda: None, lambda: None)  # the helper polls through the wrapper now
    yield mode
    monkeypatch.undo()
    workers.both(lambda: None, lambda: None)  # the helper back on the real poll


def _pause(rng: random.Random) -> None:
    r = rng.random()
    if r < 0.2:
        time.sleep(rng.random() * 2e-4)  # descheduled: the caller may finish first
    elif r < 0.7:
        _spin_for(rng.random() * 50)


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("gated", [False, True])
def test_each_half_runs_exactly_once_whoever_claims_it(delayed_helper, where, gated):
    delayed_helper["where"] = where
    helper = workers._get()
    ran_before, rng = helper.helper_ran, random.Random(1)
    runs: list = []
    n, k = 2000, -1
    # 2000 calls, and more (up to 20000) until each side has won a half: on a busy machine
    # (the other test worker on the other core) one side can win a long streak
    while k + 1 < n or (k + 1 < 10 * n and not 0 < helper.helper_ran - ran_before < k + 1):
        k += 1
        work = rng.random() * 40

        def first(go=workers.NO_GO, k=k, work=work):
            spin.announce(go)
            _spin_for(work)
            runs.append((k, 0, threading.current_thread().name))

        def second(k=k):
            runs.append((k, 1, threading.current_thread().name))
        workers.both(first, second, gated=gated)
        # both returned: its two halves are done (neither is still to run)
        assert sorted(r[:2] for r in runs[-2:]) == [(k, 0), (k, 1)], runs[-4:]
    calls = k + 1
    assert sorted(r[:2] for r in runs) == [(k, h) for k in range(calls) for h in (0, 1)]
    by_helper = sum(r[2] == "nd4py-worker" for r in runs)
    assert all(r[2] != "nd4py-worker" for r in runs if r[1] == 0)
    assert by_helper == helper.helper_ran - ran_before
    # the timing mix makes both sides win some: otherwise the test proves nothing
    assert 0 < by_helper < calls, (by_helper, calls)


def test_caller_waits_for_a_half_the_helper_claimed_even_asleep(delayed_helper):
    """The helper claims, then is held up longer than the caller's polls: the caller must
    sleep and be woken (no lost wake-up: the 50 ms net stays unused), never run the half
    itself as well."""
    delayed_helper["where"] = "after"
    helper = workers._get()
    saved, helper.spins = helper.spins, 10
    try:
        timeouts, runs = helper.timeouts, []
        for k in range(60):
            claimed = threading.Event()

            def first(go, claimed=claimed):
                spin.announce(go)
                claimed.wait(0.01)  # give the helper its claim (without the GIL)

            def second(k=k, claimed=claimed):
                claimed.set()
                time.sleep(0.001)  # long beside the caller's 10 polls: it goes to sleep
                runs.append(k)
            workers.both(first, second, gated=True)
            assert runs[-1:] == [k]
        assert runs == list(range(60))
        assert helper.timeouts == timeouts, "a wake-up was lost (found by the 50 ms net)"
    finally:
        helper.spins = saved


def test_concurrent_callers_under_stealing(delayed_helper):
    """Threads calling ``both`` at once: one holds the helper (and may take its half back),
    the others run serially; every half once."""
    hits, lock = [], threading.Lock()

    def caller(t):
        for k in range(50):
            def half(h, k=k):
                return lambda go=workers.NO_GO: (_spin_for(5), lock.acquire(),
                                                 hits.append((t, k, h)), lock.release())
            workers.both(half(0), half(1), gated=k % 2 == 0)
    threads = [threading.Thread(target=caller, args=(t,)) for t in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(hits) == [(t, k, h) for t in range(3) for k in range(50) for h in (0, 1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_stolen_half_computes_the_same_bits(monkeypatch, dtype):
    """A split matmul whose second half the caller always takes back (the helper never
    wins a claim), the helper's runs and a serial run: identical bits."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((96, 160)).astype(dtype)
    b = rng.standard_normal((160, 144)).astype(dtype)
    monkeypatch.setattr(M, "MIN_MNK", 0)
    monkeypatch.setattr(M, "SPLIT_MIN_MNK", 0)
    if M.matmul2d(a, b) is None:
        pytest.skip("no private BLAS here")
    helper = workers._get()
    want = M.matmul2d(a, b)
    with monkeypatch.context() as m:  # the helper looks too late: the caller takes all
        real, entered, gate = spin.await_claim, threading.Event(), threading.Event()
        m.setattr(spin, "await_claim",
                  lambda *a: (entered.set(), gate.wait(10), real(*a))[2])
        # a job whose caller half lasts until the helper's next poll enters the wrapper, where
        # it is held until the end: the caller takes every second half back, this one too
        workers.both(lambda: entered.wait(10), lambda: None)
        assert entered.is_set(), "the helper never polled through the wrapper"
        before = helper.helper_ran
        stolen = [M.matmul2d(a, b) for _ in range(5)]
        gate.set()
        assert helper.helper_ran == before
    workers.both(lambda: None, lambda: None)
    with monkeypatch.context() as m:
        m.setattr(workers, "_ENABLED", False)
        serial = M.matmul2d(a, b)
    for got in stolen + [serial]:
        np.testing.assert_array_equal(got, want)
