"""Routes chosen by measurement (``samediff/kernels/routes.py``) and the numpy tier while kernels
compile (``samediff/kernels/compiling.py``).

No test times real work: the chooser's clock is a fake that the fake routes advance, and the
compile thread is held by a job waiting on an event, so every test decides when a kernel
"finishes" compiling.
"""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import nd4py as nd
from samediff import compiler
from samediff.kernels import cnn, compiling, finite, routes
from samediff.kernels import matmul as M


class FakeClock:
    def __init__(self) -> None:
        self.t, self.calls = 0.0, {}

    def __call__(self) -> float:
        return self.t

    def route(self, name: str, cost_s: float):
        def run():
            self.t += cost_s
            self.calls[name] = self.calls.get(name, 0) + 1
            return name
        return run


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(routes, "_clock", fake)
    monkeypatch.setattr(routes, "_load", lambda: 0.0)  # a quiet machine, whatever runs beside
    return fake


@pytest.fixture
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ND4PY_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_the_faster_route_is_chosen_and_remembered(clock, cache):
    c = routes.Chooser("t_fast", ("numpy", "private"))
    d, out = c.measure("float32 m2^7", {"numpy": clock.route("numpy", 2e-3),
                                        "private": clock.route("private", 1e-3)}, "m128")
    assert (d.route, out) == ("private", "private")  # the caller gets the winner's result
    assert "measured 1 ms vs numpy 2 ms at m128 float32" == d.why
    assert c.decided("float32 m2^7") is d and c.decided("float32 m2^8") is None
    d2, _ = c.measure("float32 m2^8", {"numpy": clock.route("numpy", 1e-3),
                                       "private": clock.route("private", 2e-3)})
    assert d2.route == "numpy"


def test_the_reference_wins_ties_and_near_ties(clock, cache):
    c = routes.Chooser("t_tie", ("numpy", "private"), persist=False)
    near = 1e-3 * (1 - routes.MARGIN / 2)  # faster, but within the margin
    d, _ = c.measure("c", {"numpy": clock.route("numpy", 1e-3),
                           "private": clock.route("private", near)})
    assert d.route == "numpy"
    keeps = routes.Chooser("t_tie2", ("numpy", "private"), persist=False, prefer="private")
    d, _ = keeps.measure("c", {"numpy": clock.route("numpy", near),
                               "private": clock.route("private", 1e-3)})
    assert d.route == "private"  # numpy is faster, but within the margin
    d, _ = keeps.measure("d", {"numpy": clock.route("numpy", 0.5e-3),
                               "private": clock.route("private", 1e-3)})
    assert d.route == "numpy" and d.why.startswith("measured 0.5 ms vs private 1 ms")


def test_the_measurement_is_bounded(clock, cache):
    c = routes.Chooser("t_budget", ("numpy", "private"), persist=False)
    c.measure("big", {"numpy": clock.route("numpy", 0.05), "private": clock.route("p", 0.05)})
    assert clock.calls == {"numpy": 2, "p": 2}  # an untimed run and one round: over budget
    clock.calls.clear()
    c.measure("small", {"numpy": clock.route("numpy", 1e-4), "private": clock.route("p", 1e-4)})
    assert clock.calls == {"numpy": 1 + routes.ROUNDS, "p": 1 + routes.ROUNDS}
    assert (1 + routes.ROUNDS) * 2e-4 <= routes.BUDGET_S


def test_decisions_reload_from_disk_and_a_stale_file_is_ignored(clock, cache, monkeypatch):
    c = routes.Chooser("t_disk", ("numpy", "private"))
    c.measure("cls", {"numpy": clock.route("numpy", 2e-3), "private": clock.route("p", 1e-3)})
    path = routes._path()
    assert path.parent == cache / "routes" and path.exists()
    again = routes.Chooser("t_disk", ("numpy", "private"))  # a new process's chooser
    d = again.decided("cls")
    assert d.route == "private" and d.why.endswith("(cached)")
    # the same file name written under other versions (a collision, a hand edit): ignored
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "versions": "another machine"}))
    assert routes.Chooser("t_disk", ("numpy", "private")).decided("cls") is None
    # another machine or install reads another file
    monkeypatch.setattr(routes, "_VERSIONS", "r1-another-cpu")
    assert routes._path() != path


def test_a_decision_measured_on_a_busy_machine_is_not_saved(clock, cache, monkeypatch):
    """High load, or one route's rounds far apart (a process took the core meanwhile): the
    decision serves this process and is measured again by the next one."""
    def uneven(name, costs):
        costs = iter(costs)

        def run():
            clock.t += next(costs)
            return name
        return run
    c = routes.Chooser("t_busy", ("numpy", "private"))
    quiet = [1e-3] * 6
    spiky = [1e-3, 1e-3, 5e-3, 1e-3, 1e-3, 1e-3]  # untimed first run, then a 5x round
    d, _ = c.measure("spread", {"numpy": uneven("numpy", spiky),
                                "private": uneven("private", [5e-4] * 6)})
    assert d.route == "private" and c.decided("spread") is d  # kept in memory, used
    assert "busy: numpy's rounds spread 5x; not saved" in d.why
    assert not routes._path().exists()  # nothing written
    monkeypatch.setattr(routes, "_load", lambda: 2.0 * (routes.os.cpu_count() or 1))
    d, _ = c.measure("load", {"numpy": uneven("numpy", quiet),
                              "private": uneven("private", [5e-4] * 6)})
    assert "busy: load" in d.why and not routes._path().exists()
    monkeypatch.setattr(routes, "_load", lambda: 0.0)
    d, _ = c.measure("quiet", {"numpy": uneven("numpy", quiet),
                               "private": uneven("private", [5e-4] * 6)})
    assert "busy" not in d.why
    again = routes.Chooser("t_busy", ("numpy", "private"))  # the next process
    assert again.decided("quiet").route == "private"
    assert again.decided("spread") is None and again.decided("load") is None


def test_a_route_that_leaves_threads_spinning_is_timed_after_the_others(clock):
    """numpy's OpenBLAS threads spin after its call and slow the private split's next call
    (fake: 2 ms right after numpy, 0.9 ms otherwise). Alternating rounds would time that
    slowdown as the private route's own and choose numpy; timed first, it wins."""
    last = []

    def numpy():
        clock.t += 1e-3
        last.append("numpy")

    def private():
        clock.t += 2e-3 if last and last[-1] == "numpy" else 0.9e-3
        last.append("private")
    runs = {"numpy": numpy, "private": private}
    naive = routes.Chooser("t_spin0", ("numpy", "private"), persist=False, prefer="private")
    assert naive.measure("c", runs)[0].route == "numpy"
    blocked = routes.Chooser("t_spin1", ("numpy", "private"), persist=False, prefer="private",
                             spins=("numpy",))
    last.clear()
    d, _ = blocked.measure("c", runs)
    assert d.route == "private" and d.why.startswith("measured 0.9 ms vs numpy 1 ms")
    assert last.index("numpy") > max(i for i, r in enumerate(last) if r == "private")


def test_forcing_decides_without_measuring(monkeypatch):
    c = routes.Chooser("t_force", ("numpy", "private"), env="T_FORCE_ROUTE", persist=False)
    assert c.forced() is None
    monkeypatch.setenv("T_FORCE_ROUTE", "private")
    assert c.forced() == routes.Decision("private", "forced by T_FORCE_ROUTE=private")
    with routes.force("t_force", "numpy"):
        assert c.forced().route == "numpy"
    monkeypatch.setenv("T_FORCE_ROUTE", "nonsense")  # not a route: measured as usual
    assert c.forced() is None


def test_matmul_measures_once_per_class_and_uses_the_choice(clock, cache, monkeypatch):
    monkeypatch.delenv("ND4PY_BLAS", raising=False)
    monkeypatch.setattr(M, "CHOOSER", routes.Chooser("t_matmul", ("numpy", "private", "in_turn"),
                                                     prefer="in_turn"))
    monkeypatch.setattr(M, "_ROUTE", {})
    monkeypatch.setattr(M, "_numpy_woke", float("-inf"))  # (an earlier test's numpy product)
    ran, private = [], M._private
    monkeypatch.setattr(M, "_private", lambda *args, **kw: (ran.append(args[4:] == (True,)),
                                                            private(*args, **kw))[1])
    timed, measure = [], M.CHOOSER.measure  # (the fake clock stands still: a tie, in_turn wins)
    monkeypatch.setattr(M.CHOOSER, "measure", lambda cls, runs, *args: (
        timed.append((cls, sorted(runs))), measure(cls, runs, *args))[1])
    a, b = np.ones((128, 96)), np.ones((96, 128))  # 1,572,864 multiply-adds: split
    assert (M.matmul2d(a, b) == 96).all()  # the measuring call answers
    assert timed == [("float64 m2^7 n2^7 k2^6 split", ["in_turn", "numpy", "private"])]
    ran.clear()
    assert (M.matmul2d(a, b) == 96).all()  # then the choice, without measuring
    assert ran == [True] and len(timed) == 1
    ran.clear()
    small = np.ones((64, 80)), np.ones((80, 96))  # 491,520: not split, so no in_turn route
    assert (M.matmul2d(*small) == 80).all()
    assert timed[1] == ("float64 m2^6 n2^6 k2^6", ["numpy", "private"])


def test_in_turn_halves_give_the_split_bits():
    if not M.blas.available():
        pytest.skip(M.blas.why_not())
    rng = np.random.default_rng(3)
    a = rng.standard_normal((257, 300)).astype(np.float32)
    b = rng.standard_normal((300, 70)).astype(np.float32)
    parts = M.workers.halves(257, 257 * 300 * 70, 0)
    assert len(parts) == 2
    split, in_turn = M._private(a, b, True, parts), M._private(a, b, True, parts, True)
    assert split.tobytes() == in_turn.tobytes()
    np.testing.assert_allclose(split, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_explain_says_which_route_and_why(monkeypatch):
    x = nd.create(np.ones((128, 784), np.float32))
    w = nd.create(np.ones((784, 256), np.float32))
    previous = compiler.set_executor("compiled")  # (one library step: nothing to compile)
    try:
        compiled = nd.compile(lambda x, w: x @ w)
        compiled(x, w)
        assert "library: matmul [route private: forced by ND4PY_BLAS=private]" \
            in compiled.last_plan.explain()
        monkeypatch.delenv("ND4PY_BLAS")
        cls = "float32 m2^7 n2^8 k2^9 split"
        monkeypatch.setattr(M, "CHOOSER", routes.Chooser("t_explain", ("numpy", "private", "in_turn"),
                                                         persist=False))
        assert "[route not chosen yet at " + cls in compiled.last_plan.explain()
        M.CHOOSER._memory[cls] = routes.Decision("in_turn", "measured 1.2 ms vs private 2.1 ms")
        assert "[route in_turn: measured 1.2 ms vs private 2.1 ms]" in \
            compiled.last_plan.explain()
    finally:
        compiler.set_executor(previous)


@pytest.fixture
def held(monkeypatch):
    """The compile thread, busy until ``held.set()``; readiness starts empty (and is restored)."""
    monkeypatch.setattr(compiling, "_ready", set())
    monkeypatch.setattr(compiling, "_warming", {})
    gate, started = threading.Event(), threading.Event()
    compiling.submit(lambda: (started.set(), gate.wait(30)))
    assert started.wait(30)
    yield gate
    gate.set()


def test_background_mode_answers_without_waiting_for_a_held_compile(held):
    a = np.arange(256 * 300, dtype=np.float32).reshape(256, 300) / 1e4
    b = np.ones((300, 64), np.float32)
    key = ("matmul", np.dtype(np.float32))
    with compiling.override("background"):
        assert M.matmul2d(a, b) is None  # numpy's route: _slices compiles on the held thread
        assert finite.all_finite(np.ones((3, 4), np.float32)) is True  # the numpy twin
        assert finite.all_finite(np.array([[1.0, np.nan]], np.float32)) is False
        assert not compiling.ready(key, M._warm) and compiling.pending() >= 3
        held.set()
        assert compiling.wait_ready(key, 30)
        got = M.matmul2d(a, b)  # forced private (the suite's ND4PY_BLAS): now it runs
    assert got is not None
    np.testing.assert_allclose(got, a @ b, rtol=1e-5)
    assert compiling.wait_ready(("finite", np.dtype(np.float32)), 30)


def test_a_convolution_takes_the_per_tap_route_while_its_kernels_compile(held, monkeypatch):
    warmed = []
    monkeypatch.setattr(cnn, "_warm", warmed.append)  # (no real compile: the test records it)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    with compiling.override("background"):
        got = cnn.conv(x, w, (1, 1), (1, 1), (1, 1), True)
    ref = np.zeros((2, 4, 8, 8))
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    for i in range(3):
        for j in range(3):
            ref += np.einsum("nchw,co->nohw", xp[:, :, i:i + 8, j:j + 8], w[i, j])
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    held.set()
    assert compiling.wait_ready(("im2col", np.dtype(np.float32)), 30)
    assert warmed == [("im2col", np.dtype(np.float32))]


def test_halves_run_in_turn_while_the_hand_off_compiles(held, monkeypatch):
    from samediff.kernels import split, workers
    monkeypatch.setattr(split, "_warm", lambda key: None)  # (nothing real to compile)
    seen = []
    with compiling.override("background"):
        got = split.on_halves([range(0, 2), range(2, 4)],
                              lambda part, go: seen.append((threading.get_ident(), go)) or sum(part))
    assert got == [1, 5] and {t for t, _ in seen} == {threading.get_ident()}
    assert all(go is workers.NO_GO for _, go in seen)  # the same halves, here, in turn
