"""The helper thread's hand-off (``samediff.workers``, ``samediff.spin``): gated jobs start
when the caller's kernel announces, sleeping on either side never loses a wake-up, and
failures come back to the caller. Timeouts turn a lost wake-up into a failure, not a hang."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from samediff import spin, workers

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


@needs_helper
def test_gated_helper_starts_when_the_kernel_announces():
    started = threading.Event()

    def first(go):
        spin.announce(go)  # what a nogil kernel does once it runs without the GIL
        assert started.wait(10), "the helper did not start on the announcement"

    workers.both(first, started.set, gated=True)
    assert started.is_set()


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
    out = []
    for k in range(30):
        def second(k=k):
            time.sleep(0.002 if k % 3 == 0 else 0)
            out.append(k)
        workers.both(lambda go=None: None, second, gated=k % 2 == 0)
        if k % 5 == 0:
            time.sleep(0.003)  # the helper's poll runs out: it goes to sleep
    assert out == list(range(30))


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
from samediff import spin, workers
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
