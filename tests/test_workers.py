"""The helper thread's hand-off (``samediff.kernels.workers``, ``samediff.kernels.spin``): gated jobs start
when the caller's kernel announces, sleeping on either side never loses a wake-up (the
helper counts its timed waits that ended unmet: a lost wake-up would show there), failures
come back to their own caller, and an interrupted caller leaves nothing that stalls the
next. Calls that could hang run in a thread with a deadline."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from samediff.kernels import spin, workers

needs_helper = pytest.mark.skipif(not workers.enabled(), reason="one CPU or ND4PY_WORKERS=1")


def test_spin_primitives():
    flags = np.zeros(4, np.int64)
    assert spin.spin_until(flags, 1, 0, 0) and not spin.spin_until(flags, 1, 5, 100)
    spin.publish(flags, 1, 5)
    assert flags[1] == 5 and spin.spin_until(flags, 1, 5, 0)
    # publish then poll: 1 when the awaited value is there, 0 when the polls run out, 2 at
    # once when the stop slot is set
    assert spin.publish_then_spin(flags, 0, 7, 1, 5, 3, 10) == 1 and flags[0] == 7
    assert spin.publish_then_spin(flags, 0, 8, 1, 6, 3, 10) == 0 and flags[0] == 8
    flags[3] = 1
    assert spin.publish_then_spin(flags, 0, 9, 1, 5, 3, 10) == 2 and flags[0] == 9
    spin.announce((flags, 2, 11))
    assert flags[2] == 11
    assert 0 < spin.ns_per_spin() < 10_000


@pytest.fixture
def short_polls():
    """Polls of ~10 spins: every wait falls through to the sleeping path."""
    helper = workers._get()
    saved, helper.spins = helper.spins, 10
    yield helper
    helper.spins = saved


def _until(condition, seconds: float = 10.0) -> None:
    """Sleep (letting other threads run) until ``condition()``; fail after ``seconds``."""
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "the condition did not come true in time"
        time.sleep(0.0005)


def _within(seconds: float, fn) -> None:
    """``fn()`` in a thread; fail (instead of hanging the suite) if it takes longer."""
    errors: list = []

    def target():
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 -- re-raised below
            errors.append(exc)
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"did not finish within {seconds} s (a lost hand-off)"
    if errors:
        raise errors[0]


@needs_helper
def test_gated_helper_starts_when_the_kernel_announces():
    helper = workers._get()
    saved, helper.spins = helper.spins, 1 << 40  # the helper polls (awake) after the next job
    try:
        # a job the helper itself runs (the caller's half waits for its claim: an instant
        # caller half would take the second half back, leaving an asleep helper asleep)
        ran = helper.helper_ran
        workers.both(lambda: _until(lambda: helper.helper_ran > ran), lambda: None)
        started, tokens = threading.Event(), []

        def first(go):
            tokens.append(go)
            spin.announce(go)  # what a nogil kernel does once it runs without the GIL
            assert started.wait(10), "the helper did not start on the announcement"

        workers.both(first, started.set, gated=True)
        assert started.is_set() and tokens[0] is not workers.NO_GO
    finally:
        helper.spins = saved
        workers.both(lambda: None, lambda: None)  # back to polling for the normal time


@needs_helper
@pytest.mark.parametrize("polls", ["default", "short"])
def test_gated_first_that_never_announces_still_gets_its_second_half(polls, request):
    if polls == "short":
        request.getfixturevalue("short_polls")
    got = []
    workers.both(lambda go: got.append(("first", len(go))), lambda: got.append("second"),
                 gated=True)
    assert sorted(map(str, got)) == ["('first', 3)", "second"]


def test_serial_gated_first_gets_the_dummy_token(monkeypatch):
    monkeypatch.setattr(workers, "_ENABLED", False)
    seen = []
    workers.both(lambda go: seen.append(go), lambda: seen.append("second"), gated=True)
    assert seen == [workers.NO_GO, "second"]


@needs_helper
def test_sleeping_sides_are_woken(short_polls):
    """Short polls: the caller sleeps while the helper's half runs long, and the helper
    sleeps between jobs spaced apart; every job still completes, in order."""
    out, timeouts = [], short_polls.timeouts
    for k in range(30):
        def second(k=k):
            time.sleep(0.002 if k % 3 == 0 else 0)
            out.append(k)
        workers.both(lambda go=None: None, second, gated=k % 2 == 0)
        if k % 5 == 0:
            time.sleep(0.003)  # the helper's poll runs out: it goes to sleep
    assert out == list(range(30))
    assert short_polls.timeouts == timeouts, "a wake-up was lost (found by the 50 ms net)"


@needs_helper
def test_failures_come_back_in_either_protocol(short_polls):
    def boom():
        raise KeyError("helper half")
    with pytest.raises(KeyError, match="helper half"):
        workers.both(lambda go: spin.announce(go), boom, gated=True)
    with pytest.raises(ZeroDivisionError):  # the caller's failure wins; both halves ran
        ran = []
        workers.both(lambda go: 1 / 0, lambda: ran.append(1), gated=True)
    assert ran == [1]
    done = []
    workers.both(lambda: done.append(1), lambda: done.append(2))
    assert sorted(done) == [1, 2]


def test_no_spinning_and_no_helper_give_the_same_results():
    """``ND4PY_WORKER_SPIN_US=0`` (sleep at once) and ``ND4PY_WORKERS=1`` (no helper), in
    fresh processes: many hand-offs, gated or not, all complete."""
    code = """
from samediff.kernels import spin, workers
out = []
for k in range(200):
    workers.both(lambda go=workers.NO_GO, k=k: (spin.announce(go), out.append(2 * k)),
                 lambda k=k: out.append(2 * k + 1), gated=k % 2 == 0)
assert sorted(out) == list(range(400)), out
print("ok", workers.enabled())
"""
    for env in ({"ND4PY_WORKER_SPIN_US": "0"}, {"ND4PY_WORKERS": "1"}):
        done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("ok")


@needs_helper
def test_compile_hand_off_compiles_every_signature_the_hand_off_calls():
    """The compile helper warms the hand-off with ``compile_hand_off``; a hand-off afterwards
    -- the helper's half or the caller's, awake or after a sleep -- compiles nothing more
    (it used to compile the helper's "done" path in the middle of a first training step).
    In a fresh process: what this one compiled before proves nothing."""
    code = """
import time
from samediff.kernels import spin, workers
fns = [getattr(spin, n) for n in spin.__all__ if hasattr(getattr(spin, n), "signatures")]
workers.compile_hand_off()
before = {f.__name__: set(f.signatures) for f in fns}
helper = workers._get()
out = []
for spins in (helper.spins, 10):  # polls that find the other side, and ones that sleep
    helper.spins = spins
    for k in range(100):
        slow = (lambda: time.sleep(0.002)) if k % 3 == 0 else (lambda: None)
        workers.both(lambda go=workers.NO_GO, k=k: (spin.announce(go), slow(), out.append(k)),
                     lambda k=k: (slow(), out.append(-k)), gated=k % 2 == 0)
after = {f.__name__: set(f.signatures) for f in fns}
new = {n: after[n] - before[n] for n in after if after[n] - before[n] and n != "announce"}
assert not new, new
print("ok", helper.helper_ran)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")


@needs_helper
def test_an_interrupted_caller_leaves_nothing_behind():
    """Ctrl-C in ``first`` while the helper's half fails: the interrupt propagates; the next
    call neither inherits that failure nor waits for anything."""
    def boom():
        raise ValueError("the interrupted call's half")

    def interrupted(go):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        workers.both(interrupted, boom, gated=True)
    got = []
    _within(10, lambda: workers.both(lambda: got.append(1), lambda: got.append(2)))
    assert sorted(got) == [1, 2]


@needs_helper
def test_a_ticket_taken_but_never_posted_does_not_stall_the_next_call():
    """An interrupt between taking a ticket and posting it: the next caller's go supersedes
    it (the helper waits for any new go, not for one number), and a failure recorded for an
    abandoned ticket is not handed to the next caller."""
    helper = workers._get()
    helper.ticket += 1
    helper.job = (helper.ticket, lambda: None)  # stored, never posted
    helper.failure = (helper.ticket, RuntimeError("abandoned"))
    got = []
    _within(10, lambda: workers.both(lambda: got.append(1), lambda: got.append(2)))
    assert sorted(got) == [1, 2]
