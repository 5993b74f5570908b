"""Loops compiled whole (``samediff/compiler/loop_kernels.py``): a table of loop programs, each
run by the per-step plans (the interpreter) and compiled whole, with the same results; which
loops compile whole and which fall back (and still give the same results); per-step outputs
growing past their first allocation; the background mode stepping until the loop function is
ready."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import compiler
from samediff.compiler import loop_kernels
from samediff.kernels import compiling

RNG = np.random.default_rng(17)
V = RNG.uniform(0.5, 2.0, 7)
W = RNG.uniform(-0.5, 0.5, 7)
ROWS = RNG.uniform(-1.0, 1.0, (6, 7))


def newton(a):  # fori_loop: an integer counter and a vector
    return nd.fori_loop(0, 30, lambda i, x: 0.5 * (x + a / x), a)


def decay_rows(xs):  # scan with rows, per-step outputs (a vector and a scalar), a capture
    w = nd.create(W)
    return nd.scan(lambda c, x: (c * 0.5 + x * w, (c.sum(), c * x)), nd.create(np.zeros(7)), xs)


def reverse_rows(xs):
    return nd.scan(lambda c, x: (nd.maximum(c, x) - 0.1, c), nd.create(np.zeros(7)), xs,
                   reverse=True)


def normalize_until(x):  # two phases per step (x / sum(x)), a max reduction in the cond
    body = lambda c: (c[0] + 1, (c[1] * c[1]) / (c[1] * c[1]).sum() + 0.01)  # noqa: E731
    return nd.while_loop(lambda c: (c[1].max() > 0.2) & (c[0] < 50), body,
                         (nd.create(0), x))


def halve_any(x):  # a bool reduction in the cond, a float32 carry, max_iterations
    return nd.while_loop(lambda v: (v > 0.01).any(), lambda v: v * np.float32(0.5),
                         x.cast("float32"), max_iterations=40)


def long_while(x):  # 100 steps with per-step outputs: the save-all gradient's forward loop
    return nd.grad(lambda v: nd.while_loop(lambda c: c[0] < 100,
                                           lambda c: (c[0] + 1, nd.sin(c[1]) * 0.9 + 0.1),
                                           (nd.create(0), v))[1].sum())(x)


def scalar_loop(x):  # no vector at all: scalars only
    return nd.while_loop(lambda c: c[1] < 1000.0, lambda c: (c[0] + 1, c[1] * 1.5 + 1.0),
                         (nd.create(0), x.sum()))


def gradient_of_scan(xs):  # the backward reverse scan over saved carries, compiled too
    return nd.grad(lambda r: decay_rows(r)[0].sum() + decay_rows(r)[1][0].sum())(xs)


PROGRAMS = [(newton, V), (decay_rows, ROWS), (reverse_rows, ROWS), (normalize_until, V),
            (halve_any, V), (long_while, W), (scalar_loop, np.float64(2.0)),
            (gradient_of_scan, ROWS)]


def _leaves(result):
    if isinstance(result, (tuple, list)):
        return [x for r in result for x in _leaves(r)]
    return [np.asarray(result.numpy())]


def _run(fn, arg, executor):
    previous = compiler.set_executor(executor)
    try:
        with nd.compile_mode("sync"):
            return _leaves(nd.compile(fn)(nd.create(arg)))
    finally:
        compiler.set_executor(previous)


@pytest.mark.parametrize("fn, arg", PROGRAMS, ids=[f.__name__ for f, _ in PROGRAMS])
def test_compiled_whole_equals_the_stepped_loop(fn, arg):
    runs = sum(k.runs for k in loop_kernels._BY_KEY.values())
    stepped = _run(fn, arg, "interpreter")
    assert sum(k.runs for k in loop_kernels._BY_KEY.values()) == runs  # (never compiled)
    whole = _run(fn, arg, "compiled")
    assert sum(k.runs for k in loop_kernels._BY_KEY.values()) > runs  # (ran compiled)
    assert len(whole) == len(stepped)
    for got, want in zip(whole, stepped):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def _graph(fn, *types):
    """The body graphs of the one loop node ``fn`` records on placeholders of ``types``."""
    from samediff import SameDiff
    sd = SameDiff.create()
    args = [sd.placeholder(f"a{k}", np.float64, *shape) for k, shape in enumerate(types)]
    fn(*args)
    (node,) = [n for n in sd.graph.nodes if n.op.bodies]
    return node


def test_which_loops_compile_whole():
    from samediff.ops import TensorType
    f64 = np.dtype("float64")
    node = _graph(lambda a: nd.scan(lambda c, x: (c * x, None), a, nd.create(ROWS)), (7,))
    kernel = loop_kernels.loop_kernel(None, node.attrs.body,
                                      [TensorType((7,), f64), TensorType((6, 7), f64)], 1, 1)
    assert kernel is not None
    matmul = _graph(lambda a: nd.scan(lambda c, x: (c.mmul(x), None), a,
                                      nd.create(np.ones((2, 3, 3)))), (3, 3))
    assert loop_kernels.loop_kernel(None, matmul.attrs.body, [
        TensorType((3, 3), f64), TensorType((2, 3, 3), f64)], 1, 1) is None
    partial = _graph(lambda a: nd.while_loop(lambda c: c.sum() < 10.0,
                                             lambda c: c + c.sum(axis=1, keep_dims=True), a),
                     (2, 3))
    assert loop_kernels.loop_kernel(partial.attrs.cond, partial.attrs.body,
                                    [TensorType((2, 3), f64)], 1, 0) is None


@pytest.mark.compiled
def test_a_loop_that_does_not_compile_whole_steps_with_the_same_result():
    mats = RNG.normal(size=(4, 3, 3)) * 0.5
    f = nd.compile(lambda a, m: nd.scan(lambda c, x: (c.mmul(x) + 0.1, c.sum()), a, m))
    c, ys = f(nd.create(np.eye(3)), nd.create(mats))
    want, sums = np.eye(3), []
    for m in mats:
        sums.append(want.sum())
        want = want @ m + 0.1
    np.testing.assert_allclose(c.numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(ys.numpy(), sums, rtol=1e-12)


@pytest.mark.compiled
def test_an_empty_max_reduction_is_left_to_the_interpreter():
    """numpy raises for the max of nothing; so does the loop, named, compiled or not."""
    f = nd.compile(lambda x: nd.while_loop(lambda v: v.max() > 1.0, lambda v: v * 0.5, x))
    with pytest.raises(Exception, match="max|zero-size|empty"):
        f(nd.create(np.zeros(0)))


@pytest.mark.compiled
def test_background_mode_steps_until_the_loop_function_is_ready():
    a = nd.create(V * 1.7)  # (a loop of its own source: not compiled by another test)
    f = nd.compile(lambda x: nd.fori_loop(0, 13, lambda i, v: v * 0.75 + a * 0.125, x))
    want = V.copy()
    for _ in range(13):
        want = want * 0.75 + V * 1.7 * 0.125
    with nd.compile_mode("background"):
        first = f(nd.create(V)).numpy()
        kernels = [k for k in loop_kernels._BY_KEY.values() if "0.75" in k.source]
        assert kernels and compiling.wait_ready(kernels[0].key, timeout=120)
        again = f(nd.create(V)).numpy()
    np.testing.assert_allclose(first, want, rtol=1e-13)
    np.testing.assert_array_equal(again, first)
    assert kernels[0].runs >= 1


@pytest.mark.compiled
def test_explain_says_how_each_loop_runs():
    fused = nd.compile(lambda x: nd.scan(lambda c, r: (c * 0.5 + r, None), x[0], x)[0])
    fused(nd.create(ROWS))
    assert "scan [body: " in fused.explain() and "compiled whole" in fused.explain()
    mats = nd.create(np.ones((2, 3, 3)))
    stepped = nd.compile(lambda a: nd.scan(lambda c, m: (c.mmul(m), None), a, mats)[0])
    stepped(nd.create(np.eye(3)))
    assert "per-step plans (" in stepped.explain() and "body: matmul" in stepped.explain()
