"""``while_loop`` (``samediff/control/while_loop.py``): the functional form eagerly, traced,
compiled and on SameDiff variables; one plan for every trip count; ``max_iterations``; both
gradient strategies (save every carry; binomial checkpointing, with its memory and
recomputation bounds) against finite differences; second derivatives; ND4J's ``whileLoop``;
named errors that leave no state behind; save/load. The op's table rows (eager vs reference,
traced, compiled, save/load) are in ``op_samples_control.py``."""
from __future__ import annotations

from math import comb

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff
from samediff.control import CarryError, PredicateError
from samediff.control.while_loop import binomial_split, reverse_with_checkpoints
from samediff.errors import GradientError, OpError

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_references import central_differences
except ImportError:  # ... or tests/ became one
    from .op_references import central_differences

F64 = np.float64
RNG = np.random.default_rng(5)
W = RNG.uniform(0.2, 0.6, 3)
X0 = RNG.uniform(0.5, 1.5, 3)


def shrink(carry):
    """{"i": steps, "x": x}: x <- x * W + 0.1 sin(x), until |x|_1 < 0.05 (a data-dependent trip
    count)."""
    return {"i": carry["i"] + 1, "x": carry["x"] * nd.create(W) + nd.sin(carry["x"]) * 0.1}


def still_large(carry):
    return carry["x"].abs().sum() > 0.05


def reference(x, w=W, limit=None):
    i = 0
    while np.abs(x).sum() > 0.05 and (limit is None or i < limit):
        i, x = i + 1, x * w + 0.1 * np.sin(x)
    return i, x


def _check(result, x0=X0, limit=None):
    i, x = reference(x0, limit=limit)
    assert int(result["i"].numpy()) == i and result["i"].dtype == np.int64
    np.testing.assert_allclose(result["x"].numpy(), x, rtol=1e-13)


def test_eager_traced_compiled_and_samediff_agree_with_the_loop():
    init = {"i": nd.create(0), "x": nd.create(X0)}
    _check(nd.while_loop(still_large, shrink, init))
    with nd.graph_scope():
        traced = nd.while_loop(still_large, shrink, init)
    _check(traced)
    f = nd.compile(lambda init: nd.while_loop(still_large, shrink, init))
    _check(f(init))
    sd = SameDiff.create()
    p = sd.placeholder("x", F64, 3)
    out = nd.while_loop(still_large, shrink, {"i": sd.constant("i0", np.array(0)), "x": p})
    got = sd.output({"x": X0}, out["i"].name, out["x"].name)
    _check({"i": got[out["i"].name], "x": got[out["x"].name]})


def test_one_compiled_plan_serves_every_trip_count():
    f = nd.compile(lambda init: nd.while_loop(still_large, shrink, init))
    counts = set()
    for scale in (0.01, 1.0, 4.0, 30.0):  # 0 to many steps
        x0 = X0 * scale
        out = f({"i": nd.create(0), "x": nd.create(x0)})
        _check(out, x0)
        counts.add(int(out["i"].numpy()))
    assert len(counts) == 4 and 0 in counts
    assert f.cache_info()["traces"] == 1  # the trip count is not part of the key


def test_max_iterations_stops_the_loop_and_zero_iterations_return_the_init():
    init = {"i": nd.create(0), "x": nd.create(X0)}
    _check(nd.while_loop(still_large, shrink, init, max_iterations=2), limit=2)
    with nd.graph_scope():
        traced = nd.while_loop(still_large, shrink, init, max_iterations=2)
    _check(traced, limit=2)
    never = nd.while_loop(lambda c: c.sum() > 1e9, lambda c: c * 2.0, nd.create(X0))
    np.testing.assert_array_equal(never.numpy(), X0)
    with nd.graph_scope():
        never = nd.while_loop(lambda c: c.sum() > 1e9, lambda c: c * 2.0, nd.create(X0))
    np.testing.assert_array_equal(never.numpy(), X0)
    assert int(nd.while_loop(still_large, shrink, init, max_iterations=0)["i"].numpy()) == 0


def _loss(w, x0, checkpoint):
    """A loss through a loop whose body closes over ``w`` (a capture: its gradient is summed
    over the steps) and whose trip count depends on the data (constant near the point)."""
    body = lambda c: {"i": c["i"] + 1, "x": c["x"] * w + nd.sin(c["x"]) * 0.1}  # noqa: E731
    out = nd.while_loop(still_large, body, {"i": nd.create(0), "x": x0}, checkpoint=checkpoint)
    return (out["x"] * out["x"]).sum()


@pytest.mark.parametrize("checkpoint", [None, 1, 2, 5])
def test_both_gradient_strategies_equalcentral_differences(checkpoint):
    gw, gx = nd.grad(lambda w, x: _loss(w, x, checkpoint), argnums=(0, 1))(nd.create(W),
                                                                         nd.create(X0))
    ref = lambda w, x: float((reference(x, w)[1] ** 2).sum())  # noqa: E731
    assert reference(X0)[0] >= 5  # (enough steps for the checkpoints to be recomputed)
    np.testing.assert_allclose(gw.numpy(), central_differences(lambda w: ref(w, X0), W),
                               rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(gx.numpy(), central_differences(lambda x: ref(W, x), X0),
                               rtol=1e-6, atol=1e-10)


def test_a_zero_trip_loop_passes_the_gradient_through():
    for checkpoint in (None, 2):
        g = nd.grad(lambda x: nd.while_loop(lambda c: c.sum() > 1e9, lambda c: c * 3.0, x,
                                            checkpoint=checkpoint).sum())(nd.create(X0))
        np.testing.assert_array_equal(g.numpy(), np.ones(3))


def test_second_derivatives_save_all_and_refuse_with_checkpoints():
    def f(a, checkpoint=None):  # x <- x * a, four times from 1.5 a: 1.5 a^5
        out = nd.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1] * a),
                            (nd.create(0), a * 1.5), checkpoint=checkpoint)
        return out[1]
    second = nd.grad(nd.grad(f))(nd.create(np.float64(0.7)))
    np.testing.assert_allclose(float(second.numpy()), 20 * 0.7 ** 3 * 1.5, rtol=1e-12)
    with pytest.raises(GradientError, match="checkpoint=None"):
        nd.grad(nd.grad(lambda a: f(a, checkpoint=2)))(nd.create(0.7))


class _Carry:
    live = 0
    most = 0

    def __init__(self, t):
        self.t = t
        _Carry.live += 1
        _Carry.most = max(_Carry.most, _Carry.live)

    def __del__(self):
        _Carry.live -= 1


@pytest.mark.parametrize("steps, slots", [(1, 1), (2, 1), (10, 1), (37, 2), (100, 3),
                                          (1000, 10), (5000, 4)])
def test_binomial_checkpointing_bounds_memory_and_recomputation(steps, slots):
    """Every step is pulled back once, in reverse order, from the carry that enters it; at
    most ``slots`` carries are stored besides the start (plus the two an advance holds: the
    carry it reads and the one it makes); no step
    is recomputed more than ``r`` times, ``r`` the least with C(slots + 1 + r, r) >= steps."""
    advanced, visited = [0], []

    def advance(c, n):
        advanced[0] += n
        for _ in range(n):
            c = _Carry(c.t + 1)
        return c

    def step_back(c, g):
        visited.append(c.t)
        return g + 1
    _Carry.live = _Carry.most = 0
    start = _Carry(0)
    assert reverse_with_checkpoints(advance, step_back, start, steps, slots, 0) == steps
    assert visited == list(range(steps - 1, -1, -1))
    assert _Carry.most <= slots + 3
    r = next(r for r in range(1, steps + 2) if comb(slots + 1 + r, r) >= steps)
    assert advanced[0] <= r * steps


def test_binomial_split_leaves_a_part_each_side():
    for steps in range(2, 300, 7):
        for slots in (1, 2, 5, 20):
            assert 1 <= binomial_split(steps, slots) <= steps - 1


def test_changing_carries_and_bad_predicates_are_named():
    init = {"i": nd.create(0), "x": nd.create(X0)}
    widen = lambda c: {"i": c["i"] + 1, "x": c["x"].cast("float32")}  # noqa: E731
    regrow = lambda c: {"i": c["i"] + 1, "x": nd.concat([c["x"], c["x"]], 0)}  # noqa: E731
    restructure = lambda c: (c["i"], c["x"])  # noqa: E731
    for trace in (False, True):
        with nd.graph_scope() if trace else _nothing():
            with pytest.raises(CarryError, match="float64.*float32"):
                nd.while_loop(still_large, widen, init)
            with pytest.raises(CarryError, match=r"\[3\].*\[6\]"):
                nd.while_loop(still_large, regrow, init)
            with pytest.raises(CarryError, match="structure"):
                nd.while_loop(still_large, restructure, init)
            with pytest.raises(PredicateError, match="scalar"):
                nd.while_loop(lambda c: c["x"] > 0, shrink, init)
            with pytest.raises(PredicateError, match="BOOL"):
                nd.while_loop(lambda c: c["i"], shrink, init)
    with pytest.raises(OpError, match="max_iterations"):
        nd.while_loop(still_large, shrink, init, max_iterations=-3)
    with pytest.raises(OpError, match="checkpoint"):
        nd.while_loop(still_large, shrink, init, checkpoint=0)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_an_erring_body_leaves_the_samediff_as_it_was():
    sd = SameDiff.create()
    x, w = sd.placeholder("x", F64, 3), sd.var("w", W.copy())
    before = sd.summary()
    with pytest.raises(CarryError):
        nd.while_loop(lambda c: c.sum() > 0.1, lambda c: (c * w).cast("float32"), x)
    with pytest.raises(PredicateError):
        sd.whileLoop([x], lambda s, v: v[0], lambda s, v: [v[0] * 0.5])
    assert sd.summary() == before


def test_nd4j_while_loop_names_outputs_and_reads_only_its_loop_variables():
    sd = SameDiff.create()
    i0, x = sd.constant("i0", np.array(0)), sd.placeholder("x", F64, 3)
    w = sd.var("w", W.copy())
    out = sd.whileLoop(["i_out", "x_out", "w_out"], "loop", [i0, x, w], lambda s, v: v[0] < 6,
                       lambda s, v: [v[0] + 1, v[1] * v[2], v[2]])[:2]
    assert [o.name for o in out] == ["i_out", "x_out"]
    got = sd.output({"x": X0}, "i_out", "x_out")
    assert int(got["i_out"].numpy()) == 6
    np.testing.assert_allclose(got["x_out"].numpy(), X0 * W ** 6, rtol=1e-13)
    from samediff.control import CaptureError
    with pytest.raises(CaptureError, match="loopVars"):
        sd.whileLoop([i0, x], lambda s, v: v[0] < 6, lambda s, v: [v[0] + 1, v[1] * w])
    with pytest.raises(CarryError, match="2 loop variables"):
        sd.whileLoop([i0, x], lambda s, v: v[0] < 6, lambda s, v: [v[0] + 1])


def test_saved_and_loaded_loops_give_the_same_values_and_gradients(tmp_path):
    sd = SameDiff.create()
    x, w = sd.placeholder("x", F64, 3), sd.var("w", W.copy())
    for checkpoint in (None, 2):
        out = nd.while_loop(still_large, lambda c: {"i": c["i"] + 1,
                                                    "x": c["x"] * w + nd.sin(c["x"]) * 0.1},
                            {"i": sd.constant(f"i{checkpoint}", np.array(0)), "x": x},
                            checkpoint=checkpoint)
        loss = (out["x"] * out["x"]).sum()
    loss.mark_as_loss()
    want = sd.output({"x": X0}, loss.name)[loss.name].numpy()
    want_g = sd.calculate_gradients({"x": X0}, "w")["w"].numpy()
    sd.save(tmp_path / "m.sdz")
    back = SameDiff.load(tmp_path / "m.sdz")
    assert back.output({"x": X0}, loss.name)[loss.name].numpy() == want
    np.testing.assert_array_equal(back.calculate_gradients({"x": X0}, "w")["w"].numpy(), want_g)
    text = back.summary()
    assert "while_loop" in text and "cond(" in text and "body(" in text


def test_a_cond_inside_a_while_inside_a_scan_differentiates():
    """Nested bodies: a scan over rows whose step runs a while loop whose body holds a cond."""
    def loss(w):
        def row(c, x):
            def body(v):
                return nd.cond(v.sum() > 0, lambda a: a * w, lambda a: a * 0.5 + w, v)
            y = nd.while_loop(lambda v: v.abs().sum() > 0.2, body, x + c, max_iterations=20)
            return c + y, y.sum()
        c, ys = nd.scan(row, nd.create(np.zeros(3)), nd.create(RNG_ROWS))
        return (c * c).sum() + ys.sum()

    def ref(w):
        c, tot = np.zeros(3), 0.0
        for x in RNG_ROWS:
            v, k = x + c, 0
            while np.abs(v).sum() > 0.2 and k < 20:
                v, k = (v * w if v.sum() > 0 else v * 0.5 + w), k + 1
            c, tot = c + v, tot + v.sum()
        return float((c * c).sum() + tot)
    got = nd.grad(loss)(nd.create(W * 0.5))
    assert abs(float(loss(nd.create(W * 0.5)).numpy()) - ref(W * 0.5)) < 1e-12
    np.testing.assert_allclose(got.numpy(), central_differences(ref, W * 0.5), rtol=1e-6,
                               atol=1e-9)


RNG_ROWS = RNG.uniform(-1.0, 1.0, (3, 3))


def test_a_loop_closing_over_a_samediff_variable_records_from_concrete_values():
    """Concrete init, a cond reading a SameDiff variable: the loop records as a node (its
    trip count is only known when the graph runs)."""
    sd = SameDiff.create()
    limit = sd.placeholder("limit", F64)
    out = nd.while_loop(lambda c: c.sum() < limit, lambda c: c * 2.0, nd.create(X0))
    assert any(n.op.name == "while_loop" for n in sd.graph.nodes)
    got = sd.output({"limit": np.array(20.0)}, out.name)[out.name].numpy()
    x = X0.copy()
    while x.sum() < 20.0:
        x = x * 2.0
    np.testing.assert_array_equal(got, x)
