"""``cond``, the op that proves the room for ops carrying sub-graphs (``samediff/control``):
eager, traced, compiled, differentiated (twice), saved and loaded — and the untaken branch
never runs. Table-driven rows (eager vs reference, inference, SameDiff, save/load) are in
``op_samples_control.py``; these are the behaviours a row cannot express."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff, compiler, udf
from samediff.errors import OpError
from samediff.control import COND, BranchMismatchError, CaptureError, PredicateError, trace_body
from samediff.ir import Graph
from samediff.ops import REGISTRY, TensorType
from samediff.ops.registry import NONDIFF, REQUIRED, Attr, OpDef
from samediff.ops.validate import check_op

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_references import central_differences
except ImportError:  # ... or tests/ became one
    from .op_references import central_differences

F64 = np.float64
X = np.array([0.3, -1.2, 0.7])
Y = np.array([1.5, 0.25, -0.4])


def true_fn(x, y):
    return (x * y).sin() + x * 2.0


def false_fn(x, y):
    return (x - y).exp() * y


def reference(p, x, y):
    return np.sin(x * y) + 2.0 * x if p else np.exp(x - y) * y


def fn_of(pred_sign):
    """A scalar function of (x, y) through cond; ``pred_sign`` picks the branch by data."""
    def f(x, y):
        return nd.cond((x * pred_sign).sum() > 0, true_fn, false_fn, x, y).sum()
    return f


@pytest.mark.parametrize("p", [True, False])
def test_eager_is_plain_python_and_matches_the_reference(p):
    got = nd.cond(nd.create(p), true_fn, false_fn, nd.create(X), nd.create(Y))
    np.testing.assert_allclose(got.numpy(), reference(p, X, Y), rtol=1e-12)
    as_int = nd.cond(np.int64(3 if p else 0), true_fn, false_fn, nd.create(X), nd.create(Y))
    np.testing.assert_allclose(as_int.numpy(), reference(p, X, Y), rtol=1e-12)


@pytest.mark.parametrize("p", [True, False])
def test_traced_equals_eager_and_records_one_node(p):
    x, y = nd.create(X), nd.create(Y)
    with nd.graph_scope():
        out = nd.cond(nd.create(p), true_fn, false_fn, x, y)
    np.testing.assert_allclose(out.numpy(), reference(p, X, Y), rtol=1e-12)

    @nd.compile
    def f(x, y):
        return nd.cond(x.sum() > -100.0 if p else x.sum() > 100.0, true_fn, false_fn, x, y)
    np.testing.assert_allclose(f(x, y).numpy(), reference(p, X, Y), rtol=1e-12)
    assert "cond [then_body: 4 nodes, else_body: 3 nodes]" in f.explain()


@pytest.mark.compiled
def test_compiled_bodies_equal_the_interpreter():
    sd = SameDiff.create()
    x, y = sd.placeholder("x", F64, 3), sd.placeholder("y", F64, 3)
    out = nd.cond(x.sum() > 0, true_fn, false_fn, x, y)
    want = {}
    previous = compiler.set_executor("interpreter")
    try:
        for sign in (1, -1):
            want[sign] = sd.output({"x": sign * X, "y": Y}, out.name)[out.name].numpy()
    finally:
        compiler.set_executor(previous)
    for sign in (1, -1):
        got = sd.output({"x": sign * X, "y": Y}, out.name)[out.name].numpy()
        np.testing.assert_allclose(got, want[sign], rtol=1e-14)
        np.testing.assert_allclose(got, reference((sign * X).sum() > 0, sign * X, Y), rtol=1e-12)
    assert "cond [then_body: 4 nodes, else_body: 3 nodes]" in sd.last_plan.explain()


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_gradient_matches_finite_differences_in_each_branch(sign):
    x, y = sign * X, Y
    gx, gy = nd.grad(fn_of(1.0), argnums=(0, 1))(nd.create(x), nd.create(y))
    p = x.sum() > 0
    want_x = central_differences(lambda a: reference(p, a, y).sum(), x)
    want_y = central_differences(lambda b: reference(p, x, b).sum(), y)
    np.testing.assert_allclose(gx.numpy(), want_x, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(gy.numpy(), want_y, rtol=1e-7, atol=1e-8)


def test_second_derivative_through_cond():
    f = lambda x: nd.cond(x.sum() > 0, lambda a: (a * a * a).sum(), lambda a: a.sin().sum(), x)
    d2 = nd.grad(lambda x: nd.grad(f)(x).sum())
    for x in (X + 2.0, X - 2.0):
        want = 6.0 * x if x.sum() > 0 else -np.sin(x)
        np.testing.assert_allclose(d2(nd.create(x)).numpy(), want, rtol=1e-9)


def test_samediff_gradient_and_an_operand_one_branch_ignores():
    sd = SameDiff.create()
    x = sd.placeholder("x", F64, 3)
    w = sd.var("w", X.copy())
    out = nd.cond(x.sum() > 0, lambda a, b: (a * b).tanh(), lambda a, b: a * 3.0, x, w)
    out.sum().mark_as_loss()
    g_true = sd.calculate_gradients({"x": Y + 1.0}, "w")["w"].numpy()
    np.testing.assert_allclose(g_true, (Y + 1.0) / np.cosh(X * (Y + 1.0)) ** 2, rtol=1e-12)
    g_false = sd.calculate_gradients({"x": -Y - 1.0}, "w")["w"].numpy()
    np.testing.assert_array_equal(g_false, np.zeros(3))  # w is unused by the false branch


@pytest.fixture
def tripwire():
    """A UDF that counts its calls (forward and gradient): the untaken branch calls it."""
    calls = []

    def forward(x):
        calls.append("forward")
        raise RuntimeError("the untaken branch ran")

    op = udf.register("cond_tripwire", forward, infer=lambda types, attrs: [types[0]],
                      gradient=lambda ins, outs, gs, attrs: [gs[0] * 0.0], replace=True)
    try:
        yield op, calls
    finally:
        udf.unregister("cond_tripwire")


def test_the_untaken_branch_never_runs_forward_or_backward(tripwire):
    wire, calls = tripwire
    f = lambda x: nd.cond(x.sum() > 0, lambda a: (a * a).sum(), lambda a: wire(a).sum(), x)
    x = nd.create(X + 1.0)  # positive: the true branch
    with nd.graph_scope():
        value = f(x)
    assert value.item() == pytest.approx(((X + 1.0) ** 2).sum())
    np.testing.assert_allclose(nd.grad(f)(x).numpy(), 2.0 * (X + 1.0))
    assert calls == []
    with pytest.raises(Exception, match="untaken branch ran"):  # the test can fail
        with nd.graph_scope():
            f(nd.create(X - 1.0))
    assert calls == ["forward"]


def test_save_and_load_round_trip(tmp_path):
    sd = SameDiff.create()
    x, y = sd.placeholder("x", F64, -1), sd.placeholder("y", F64, -1)
    out = nd.cond(x.sum() > 0, lambda a, b: (true_fn(a, b), a), lambda a, b: (false_fn(a, b), b),
                  x, y)
    names = [o.name for o in out]
    sd.save(tmp_path / "cond.sdz")
    loaded = SameDiff.load(tmp_path / "cond.sdz")
    assert loaded.summary() == sd.summary()
    assert "then_body(x0, x1) ->" in loaded.summary()
    for sign in (1, -1):
        feeds = {"x": sign * X, "y": Y}
        a, b = sd.output(feeds, *names), loaded.output(feeds, *names)
        for n in names:
            np.testing.assert_array_equal(a[n].numpy(), b[n].numpy())
        np.testing.assert_allclose(a[names[0]].numpy(), reference((sign * X).sum() > 0, sign * X, Y))


def test_a_body_using_an_unknown_op_fails_to_load(tmp_path):
    udf.register("cond_scaled", lambda x: x * 3.0, replace=True)
    try:
        sd = SameDiff.create()
        x = sd.placeholder("x", F64, 3)
        nd.cond(x.sum() > 0, lambda a: REGISTRY_CALL("cond_scaled", a), lambda a: a, x)
        sd.save(tmp_path / "udf.sdz")
    finally:
        udf.unregister("cond_scaled")
    with pytest.raises(nd.UnknownOpError, match="cond_scaled"):
        SameDiff.load(tmp_path / "udf.sdz")


def REGISTRY_CALL(name, *xs):  # noqa: N802 - reads like the op call it stands for
    return nd.bind(REGISTRY[name], list(xs))


def _state(sd):
    return len(sd.graph.vars), len(sd.graph.nodes)


def test_mismatched_branches_and_bad_predicates_are_named_and_change_nothing():
    sd = SameDiff.create()
    x = sd.placeholder("x", F64, 3)
    pred, not_scalar, not_bool = x.sum() > 0, x > 0, x.sum()
    before = _state(sd)
    with pytest.raises(BranchMismatchError, match=r"output 0 differs .*dtype.*float64.*float32"):
        nd.cond(pred, lambda a: a * 2.0, lambda a: a.castTo(nd.FLOAT), x)
    with pytest.raises(BranchMismatchError, match=r"output 0 differs .*\(rank\)"):
        nd.cond(pred, lambda a: a, lambda a: a.sum(), x)
    with pytest.raises(BranchMismatchError, match=r"output 0 differs .*\(shape\)"):
        nd.cond(pred, lambda a: a, lambda a: a[:2], x)
    with pytest.raises(BranchMismatchError, match="a tuple of 2.*one array"):
        nd.cond(pred, lambda a: (a, a), lambda a: a, x)
    with pytest.raises(PredicateError, match="scalar"):
        nd.cond(not_scalar, lambda a: a, lambda a: -a, x)
    with pytest.raises(PredicateError, match="bool or an integer"):
        nd.cond(not_bool, lambda a: a, lambda a: -a, x)
    with pytest.raises(PredicateError, match="BOOL"):
        sd.ifCond("out", "if", lambda s, ins: ins[0].sum(), lambda s, ins: ins[0],
                  lambda s, ins: ins[0], inputs=[x])
    assert _state(sd) == before
    with pytest.raises(PredicateError, match="scalar"):  # eagerly too
        nd.cond(nd.create([True, False]), lambda a: a, lambda a: a, nd.create(X))


def test_outer_values_are_captured_as_operands():
    """A branch reading a traced array of the enclosing scope: lifted into an operand."""
    x = nd.create(X)
    for sign in (1.0, -1.0):
        with nd.graph_scope():
            traced = x * 2.0
            out = nd.cond((x * sign).sum() > 0, lambda a: a + traced, lambda a: a - 1.0, x)
        want = X + 2.0 * X if (X * sign).sum() > 0 else X - 1.0
        np.testing.assert_allclose(out.numpy(), want)


@pytest.mark.parametrize("executor", ["interpreter", "compiled"])
def test_captured_samediff_variables_get_gradients(executor):
    """``w`` closed over by one branch (``a * w``) and an op on ``w`` alone in the other (``w
    * 2.0``, recorded into that branch: nothing of it in the outer graph): outputs right in
    both branches, and d/dw of the taken branch equals finite differences (the reading ``w`` only through ``w * 2.0``: 2 per element)."""
    previous = compiler.set_executor(executor)
    try:
        sd = SameDiff.create()
        p, w = sd.placeholder("p", F64, 3), sd.var("w", Y.copy())
        before = [n.op.name for n in sd.graph.nodes]
        out = nd.cond(p.sum() > 0, lambda a: a * w, lambda a: a + w * 2.0, p)
        out.sum().mark_as_loss()
        assert [n.op.name for n in sd.graph.nodes][len(before):] == ["sum", "gt", "cond", "sum"]
        for feed in (X + 1.0, X - 1.0):
            taken = feed.sum() > 0

            def f(wv, feed=feed, taken=taken):
                return float(np.sum(feed * wv if taken else feed + 2.0 * wv))
            got = sd.output({"p": feed}, out.name)[out.name].numpy()
            np.testing.assert_allclose(got, feed * Y if taken else feed + 2.0 * Y)
            g = sd.calculate_gradients({"p": feed}, "w")["w"].numpy()
            np.testing.assert_allclose(g, central_differences(f, Y.copy()), rtol=1e-6, atol=1e-8)
    finally:
        compiler.set_executor(previous)


def test_a_branch_may_return_a_captured_value_and_nested_branches_capture_through():
    sd = SameDiff.create()
    p, w = sd.placeholder("p", F64, 3), sd.var("w", Y.copy())
    out = nd.cond(p.sum() > 0, lambda a: w,
                  lambda a: nd.cond(a.sum() < -1.0, lambda b: b * w, lambda b: b - w, a), p)
    for feed, want in ((X + 1.0, Y), (X - 1.0, (X - 1.0) * Y), (X * 0.0 - 0.1, -0.1 - Y)):
        np.testing.assert_allclose(sd.output({"p": feed}, out.name)[out.name].numpy(), want)
    out.sum().mark_as_loss()
    g = sd.calculate_gradients({"p": X - 1.0}, "w")["w"].numpy()
    np.testing.assert_allclose(g, X - 1.0)


def test_captures_survive_save_and_load(tmp_path):
    sd = SameDiff.create()
    p, w = sd.placeholder("p", F64, 3), sd.var("w", Y.copy())
    out = nd.cond(p.sum() > 0, lambda a: (a * w).exp(), lambda a: a - w, p)
    sd.save(tmp_path / "captured.sdz")
    loaded = SameDiff.load(tmp_path / "captured.sdz")
    for feed in (X + 1.0, X - 1.0):
        np.testing.assert_array_equal(loaded.output({"p": feed}, out.name)[out.name].numpy(),
                                      sd.output({"p": feed}, out.name)[out.name].numpy())


def test_ifcond_bodies_read_only_their_inputs():
    """ND4J's lambdas record into SameDiffs of their own: an outer variable is still an error
    naming ``inputs=``, and the outer graph is left as it was."""
    sd = SameDiff.create()
    p, w = sd.placeholder("p", F64, 3), sd.var("w", X.copy())
    before = _state(sd)
    with pytest.raises(CaptureError, match="inputs="):
        sd.ifCond(lambda s, ins: ins[0].sum() > 0, lambda s, ins: ins[0] * w,
                  lambda s, ins: ins[0], inputs=[p])
    assert _state(sd) == before
    const = np.array([10.0, 20.0, 30.0])  # eager closures are constants of the body
    out = nd.cond(p.sum() > 0, lambda a: a + const, lambda a: a - 1.0, p)
    np.testing.assert_allclose(sd.output({"p": X + 1}, out.name)[out.name].numpy(), X + 1 + const)


def test_nd4j_if_cond():
    sd = SameDiff.create()
    a, b = sd.placeholder("a", F64, 3), sd.placeholder("b", F64, 3)
    out = sd.ifCond("out", "if", lambda s, ins: ins[0].sum() > ins[1].sum(),
                    lambda s, ins: s.math.exp(ins[0]) + ins[1],
                    lambda s, ins: ins[0] * ins[1], inputs=[a, b])
    assert out.name == "if/out"
    for aa, bb in ((X + 5, Y), (X - 5, Y)):
        got = sd.output({"a": aa, "b": bb}, out.name)[out.name].numpy()
        want = np.exp(aa) + bb if aa.sum() > bb.sum() else aa * bb
        np.testing.assert_allclose(got, want, rtol=1e-12)
    (node,) = [n for n in sd.ops() if n.op is COND]
    assert node.op.bodies == ("then_body", "else_body")  # the fact the system reads
    assert [n.op.name for n in node.attrs.then_body.nodes] == ["exp", "add"]


def test_the_op_fact_is_declared_not_named():
    carriers = [n for n, op in REGISTRY.items() if op.bodies]
    assert "cond" in carriers
    for name in carriers:
        op = REGISTRY[name]
        assert all(op.attr_kinds[b][0].name == "graph" for b in op.bodies)


@pytest.mark.compiled
def test_a_body_that_draws_random_numbers_is_never_merged_or_folded():
    draw = lambda a: nd.bind(REGISTRY["dropout_mask"], [a], {"p": 0.5})  # noqa: E731

    @nd.compile
    def f(x):
        p = x.sum() > 0
        return nd.cond(p, draw, draw, x), nd.cond(p, draw, draw, x)
    first, second = f(nd.ones(200))
    assert not np.array_equal(first.numpy(), second.numpy())  # CSE would make them one draw


def test_a_body_signature_is_part_of_the_graph_value():
    a = COND.make_attrs({"then_body": _body(), "else_body": _body()}).then_body
    assert a.inputs == ("x0",) and a.outputs == ("exp",)
    again = Graph.from_dict(a.to_dict())
    assert again == a and again.outputs == a.outputs and hash(again) == hash(a)
    other = a.copy()
    other.set_outputs("x0")
    assert other.freeze() != a  # the same nodes with another signature: another function
    bad = OpDef(name="bad_bodies", inputs=("x",), attr_kinds={"n": (Attr.INT, REQUIRED)},
                infer=lambda t, a: t[0], impl=lambda x, n: x, doc="d", grad=NONDIFF,
                bodies=("n",))
    assert any("graph-valued" in p for p in check_op(bad))


def _body():
    return trace_body(lambda v: v.exp(), [TensorType((2,), np.dtype(F64))], "t")[0]


# -- switch ---------------------------------------------------------------------------------------

BRANCHES = [lambda x, y: x * y, lambda x, y: (x - y).exp(), lambda x, y: (x + y).sin() * 2.0]
BRANCH_REFS = [lambda x, y: x * y, lambda x, y: np.exp(x - y), lambda x, y: 2.0 * np.sin(x + y)]


@pytest.mark.parametrize("index", [-3, 0, 1, 2, 9])
def test_switch_takes_the_clamped_branch_eager_traced_compiled_and_in_samediff(index):
    want = BRANCH_REFS[min(max(index, 0), 2)](X, Y)
    i, x, y = nd.create(index), nd.create(X), nd.create(Y)
    np.testing.assert_allclose(nd.switch(i, BRANCHES, x, y).numpy(), want, rtol=1e-12)
    with nd.graph_scope():
        traced = nd.switch(i, BRANCHES, x, y)
    np.testing.assert_allclose(traced.numpy(), want, rtol=1e-12)
    f = nd.compile(lambda i, x, y: nd.switch(i, BRANCHES, x, y))
    np.testing.assert_allclose(f(i, x, y).numpy(), want, rtol=1e-12)
    sd = SameDiff.create()
    si = sd.placeholder("i", np.int64)
    sx, sy = sd.placeholder("x", F64, 3), sd.var("y", Y.copy())
    out = nd.switch(si, BRANCHES, sx, sy)
    np.testing.assert_allclose(sd.output({"i": np.int64(index), "x": X}, out.name)[out.name]
                               .numpy(), want, rtol=1e-12)


def test_switch_replays_one_plan_for_every_index_and_differentiates_the_taken_branch():
    f = nd.compile(lambda i, x, y: nd.switch(i, BRANCHES, x, y).sum())
    x, y = nd.create(X), nd.create(Y)
    for index in (0, 1, 2):
        f(nd.create(index), x, y)
    assert f.traces == 1
    for index in (0, 1, 2):
        g = nd.grad(lambda x: nd.switch(nd.create(index), BRANCHES, x, nd.create(Y)).sum())
        ref = BRANCH_REFS[index]
        fd = central_differences(lambda v: float(np.sum(ref(v, Y))), X.copy())
        np.testing.assert_allclose(g(x).numpy(), fd, rtol=1e-6, atol=1e-8)
        with nd.graph_scope():
            traced = nd.grad(lambda x: nd.switch(nd.create(index) + 0, BRANCHES, x, y).sum())(x)
        np.testing.assert_allclose(traced.numpy(), fd, rtol=1e-6, atol=1e-8)


def test_switch_runs_only_the_taken_branch(tripwire):
    wire, calls = tripwire
    branches = [lambda a: wire(a), lambda a: a * 2.0, lambda a: wire(a) + 1.0]
    with nd.graph_scope():
        out = nd.switch(nd.create(1), branches, nd.create(X))
    np.testing.assert_allclose(out.numpy(), 2.0 * X)
    assert calls == []
    with pytest.raises(Exception, match="untaken branch ran"):  # the test can fail
        with nd.graph_scope():
            nd.switch(nd.create(2), branches, nd.create(X))


def test_switch_refuses_a_bad_index_or_branches():
    x = nd.create(X)
    with pytest.raises(PredicateError, match="scalar integer"):
        nd.switch(nd.create(1.0), BRANCHES, x, x)
    with pytest.raises(PredicateError, match="scalar integer"):
        nd.switch(nd.create([0, 1]), BRANCHES, x, x)
    with pytest.raises(OpError, match="callables"):
        nd.switch(nd.create(0), [], x)
    with pytest.raises(BranchMismatchError):
        with nd.graph_scope():
            nd.switch(nd.create(0), [lambda a: a, lambda a: a.sum()], x)
