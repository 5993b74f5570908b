"""A table of programs with control flow — nested loops, a ``cond`` inside a ``scan``,
zero-trip loops, a loop whose body holds a CNN op, a checkpointed ``while_loop``, a ``switch``
in a ``fori_loop`` — each run eagerly, traced, interpreted and compiled, after a save/load
round trip of its SameDiff graph, with its gradient against central differences (float64).
Each program maps float64 arrays to a scalar."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff, compiler

try:  # rootdir-relative import (tests/ is not a package) ...
    from op_references import central_differences
except ImportError:  # ... or tests/ became one
    from .op_references import central_differences

RNG = np.random.default_rng(23)


def cond_in_scan(w, xs):
    def step(c, x):
        c = nd.cond((c * x).sum() > 0, lambda a: nd.tanh(a * w + x), lambda a: a * 0.5 - x, c)
        return c, c.sum()
    c, ys = nd.scan(step, w * 0.0, xs)
    return (c * c).sum() + ys.sum()


def nested_loops(w, xs):  # a while loop per row of a scan
    def row(c, x):
        v = nd.while_loop(lambda v: (v * v).sum() > 0.05, lambda v: v * w, x + c,
                          max_iterations=30)
        return c * 0.5 + v, v.sum()
    c, ys = nd.scan(row, w * 0.0, xs)
    return c.sum() + (ys * ys).sum()


def zero_trip_loops(w, xs):  # a while that never steps and a scan over no rows
    v = nd.while_loop(lambda v: v.sum() > 1e9, lambda v: v * 3.0, w)
    c, _ = nd.scan(lambda c, x: (c + x, None), w, xs[:0])
    return (v * c).sum()


def cnn_in_scan(k, xs):  # a convolution inside the body: the carry is an image
    def step(img, x):
        conv = nd.cnn.conv2d(img, k.reshape(3, 3, 1, 1), padding="same")
        return nd.tanh(conv + x.reshape(1, 1, 2, 3)), None
    img, _ = nd.scan(step, xs[0].reshape(1, 1, 2, 3) * 0.5, xs)
    return (img * img).sum()


def checkpointed_while(w, xs):
    def body(c):
        i, v = c
        return i + 1, nd.sin(v) * w + xs[0]
    _, v = nd.while_loop(lambda c: c[0] < 7, body, (nd.create(0), w * 1.0), checkpoint=2)
    return (v * v).sum()


def switch_in_fori(w, xs):
    branches = [lambda v: v * w, lambda v: nd.sin(v) + w, lambda v: v - xs[1]]
    out = nd.fori_loop(0, 5, lambda i, v: nd.switch(nd.minimum(i, 2), branches, v), xs[0])
    return out.sum()


PROGRAMS = {
    "cond_in_scan": (cond_in_scan, [RNG.uniform(-1, 1, 3), RNG.uniform(-1, 1, (4, 3))]),
    "nested_loops": (nested_loops, [RNG.uniform(0.3, 0.7, 3), RNG.uniform(-1, 1, (3, 3))]),
    "zero_trip_loops": (zero_trip_loops, [RNG.uniform(-1, 1, 3), RNG.uniform(-1, 1, (2, 3))]),
    "cnn_in_scan": (cnn_in_scan, [RNG.uniform(-0.5, 0.5, 9), RNG.uniform(-1, 1, (3, 6))]),
    "checkpointed_while": (checkpointed_while, [RNG.uniform(-1, 1, 3),
                                                RNG.uniform(-1, 1, (2, 3))]),
    "switch_in_fori": (switch_in_fori, [RNG.uniform(0.5, 1, 3), RNG.uniform(-1, 1, (2, 3))]),
}


def _value(x):
    return float(np.asarray(x.numpy()))


def _samediff_round_trip(fn, args, tmp_path):
    sd = SameDiff.create()
    phs = [sd.placeholder(f"a{k}", np.float64, *a.shape) for k, a in enumerate(args)]
    loss = fn(*phs)
    path = tmp_path / "program.sdz"
    sd.save(path)
    back = SameDiff.load(path)
    feeds = {f"a{k}": a for k, a in enumerate(args)}
    return float(back.output(feeds, loss.name)[loss.name].numpy())


def _compiled(fn, args, executor):
    previous = compiler.set_executor(executor)
    try:
        return _value(nd.compile(fn)(*[nd.create(a) for a in args]))
    finally:
        compiler.set_executor(previous)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_every_way_of_running_a_program_agrees(name, tmp_path):
    fn, args = PROGRAMS[name]
    eager = _value(fn(*[nd.create(a) for a in args]))
    with nd.graph_scope():
        traced = fn(*[nd.create(a) for a in args])
    results = {"traced": _value(traced),
               "interpreted": _compiled(fn, args, "interpreter"),
               "compiled": _compiled(fn, args, "compiled"),
               "saved and loaded": _samediff_round_trip(fn, args, tmp_path)}
    for way, got in results.items():
        assert got == pytest.approx(eager, rel=1e-12, abs=1e-13), way


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_gradients_equal_central_differences(name):
    fn, args = PROGRAMS[name]
    grads = nd.grad(fn, argnums=tuple(range(len(args))))(*[nd.create(a) for a in args])
    for k, (a, g) in enumerate(zip(args, grads)):
        def at(x, k=k):  # the program as a function of argument k alone
            return _value(fn(*[nd.create(x if j == k else y) for j, y in enumerate(args)]))
        np.testing.assert_allclose(g.numpy(), central_differences(at, a), rtol=1e-5, atol=1e-8,
                                   err_msg=f"argument {k}")
