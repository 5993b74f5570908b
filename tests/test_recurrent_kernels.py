"""The compiled LSTM time loops (``samediff/kernels/recurrent.py``) against the numpy route.

Both routes run every configuration the loops take — directions, per-example lengths
(including 0), peepholes, the cell clip, initial states, layouts — forward and back, and must
agree to float32 rounding (the loops use ``fastmath``'s sigmoid and tanh: a few ulps). Which
route a layer takes is checked too: float64, other activations and tiny layers stay on numpy.
"""
from __future__ import annotations

import numpy as np
import pytest

from samediff.kernels import blas
from samediff.ops import recurrent
from samediff.ops.registry import REGISTRY

RNG = np.random.default_rng(3)
T, B, I, H = 5, 4, 3, 6

pytestmark = pytest.mark.skipif(not blas.available(), reason=blas.why_not() or "no BLAS")


def f32(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def run(inputs, attrs, min_work, monkeypatch):
    monkeypatch.setattr(recurrent, "KERNEL_MIN_WORK", min_work)
    layer, grad = REGISTRY["lstm_layer"], REGISTRY["lstm_layer_grad"]
    a = vars(layer.make_attrs(attrs))
    outs = layer.impl(*inputs, **a)
    cotangents = [np.random.default_rng(9).normal(size=o.shape).astype(np.float32)
                  for o in outs]
    return outs, grad.impl(*inputs, *cotangents, **a)


def _case(direction="fwd", fmt="TNS", lengths=False, peephole=False, clip=0.0, states=False,
          batch=B):
    lead = (2,) if direction.startswith("bidir") else ()
    x = f32(*{"TNS": (T, batch, I), "NTS": (batch, T, I), "NST": (batch, I, T),
              "T2NS": (T, batch, I)}[fmt])
    inputs = [x, f32(*lead, I, 4 * H) * 0.5, f32(*lead, H, 4 * H) * 0.5, f32(*lead, 8 * H)]
    given = ["b"]
    if lengths:
        inputs.append(np.array([5, 0, 2, 4] if batch == B else [3] * batch))
        given.append("seq_len")
    if states:
        inputs += [f32(*lead, batch, H), f32(*lead, batch, H)]
        given += ["h0", "c0"]
    if peephole:
        inputs.append(f32(*lead, 3 * H))
        given.append("peephole")
    attrs = {"given": tuple(given), "direction": direction, "data_format": fmt,
             "cell_clip": clip}
    return pytest.param(inputs, attrs, id=f"{direction}-{fmt}-len{lengths:d}-peep{peephole:d}"
                                          f"-clip{clip}-states{states:d}-b{batch}")


CASES = [
    _case(),
    _case("bwd", lengths=True, states=True),
    _case("fwd", "NTS", lengths=True, peephole=True),
    _case("bidir_concat", "NST", peephole=True, clip=0.5),
    _case("bidir_extra_dim", "T2NS", lengths=True, states=True, peephole=True, clip=0.8),
    # one example: the loops' products with R are matrix-vector ones (``blas.gemv``)
    _case("bidir_concat", "NTS", lengths=True, states=True, peephole=True, clip=0.5, batch=1),
]


SPLITS = [pytest.param(CASES[k], s, id=f"{CASES[k].id}-{s}")
          for k in range(len(CASES)) for s in ("whole", "halves")]
# one example: its hidden units in two halves, one per thread in step (``by_units``)
SPLITS.append(pytest.param(CASES[-1], "units", id=f"{CASES[-1].id}-units"))
SPLITS.append(pytest.param(_case("bwd", lengths=True, batch=1), "units", id="bwd-len-b1-units"))


@pytest.mark.heavy(seconds=6)
@pytest.mark.parametrize("case, split", SPLITS)
def test_compiled_loops_equal_the_numpy_route(case, split, monkeypatch):
    """Also with the batch in two halves, one per thread (``SPLIT_MIN_WORK``): each half runs
    its examples through every step, per-example lengths included; and one example with its
    hidden units in two halves (``UNIT_SPLIT_MIN_HIDDEN``)."""
    from samediff.kernels import recurrent as kernels
    inputs, attrs = case.values
    monkeypatch.setattr(kernels, "SPLIT_MIN_WORK", 1 << 62 if split == "whole" else 0)
    monkeypatch.setattr(kernels, "UNIT_SPLIT_MIN_HIDDEN", 2 if split == "units" else 1 << 30)
    monkeypatch.setattr(kernels, "UNIT_SPLIT_MIN_STEPS", 1)
    calls = []
    real = kernels._forward_units
    monkeypatch.setattr(kernels, "_forward_units", lambda *a: calls.append(1) or real(*a))
    want_outs, want_grads = run(inputs, attrs, 10**9, monkeypatch)  # numpy route
    got_outs, got_grads = run(inputs, attrs, 1, monkeypatch)        # compiled loops
    assert bool(calls) == (split == "units")
    for got, want in zip((*got_outs, *got_grads), (*want_outs, *want_grads)):
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    y, examples = got_outs[0], attrs["data_format"].index("N")
    if "seq_len" in attrs["given"] and y.shape[examples] == B:
        # example 1 has length 0: zeros out, its state untouched
        assert not np.any(np.take(y, 1, axis=examples))


def test_which_layers_take_the_compiled_loops(monkeypatch):
    monkeypatch.setattr(recurrent, "KERNEL_MIN_WORK", 256)
    layer = REGISTRY["lstm_layer"]

    def takes_loops(dtype, batch, hidden, **attrs):
        a = layer.make_attrs({"given": (), **attrs})
        n = {"W": np.zeros((2, 4 * hidden), dtype), "R": np.zeros((hidden, 4 * hidden), dtype)}
        return recurrent._Direction("lstm", a, n, None, False).compiled(np.dtype(dtype), batch,
                                                                        8)
    assert takes_loops(np.float32, 32, 64)
    assert not takes_loops(np.float64, 32, 64)           # libm's tanh loop: numpy is faster
    assert not takes_loops(np.float32, 2, 64)            # tiny: never waits for a compile
    assert not takes_loops(np.float32, 32, 64, activations=("hard_sigmoid", "tanh", "tanh"))


def test_gradients_read_the_forward_workspace_instead_of_running_the_layer_again(monkeypatch):
    """Autodiff records an LSTM it differentiates with ``keep_workspace`` (``OpDef.workspace``):
    the forward loops write their tape into a fourth output that the gradient op reads, so the
    layer runs once per step of training, and the gradients equal the recomputing route's."""
    from samediff import SameDiff
    from samediff.kernels import recurrent as kernels

    def gradients(min_work):
        monkeypatch.setattr(recurrent, "KERNEL_MIN_WORK", min_work)
        rng = np.random.default_rng(4)
        sd = SameDiff.create()
        x = sd.var("x", rng.normal(size=(B, T, I)).astype(np.float32))
        w = sd.var("W", rng.normal(size=(2, I, 4 * H)).astype(np.float32) * 0.5)
        r = sd.var("R", rng.normal(size=(2, H, 4 * H)).astype(np.float32) * 0.5)
        y, h, _ = sd.rnn.lstm_layer(x, w, r, data_format="NTS", direction="bidir_sum")
        ((y * y).sum() + h.sum()).mark_as_loss()
        return sd, sd.calculate_gradients({}, "x", "W", "R")
    calls = []
    real = kernels.forward
    monkeypatch.setattr(kernels, "forward", lambda *a: calls.append(a[-1]) or real(*a))
    sd, got = gradients(1)
    assert calls == [True, True]  # one forward per direction, keeping its tape; no rerun
    # (the SameDiff adopts the gradient graph, ND4J's way: its layer now keeps the workspace,
    # which its gradient op reads)
    assert [n.attrs.keep_workspace for n in sd.graph.nodes if n.op.name == "lstm_layer"] \
        == [True]
    _, want = gradients(10**9)
    for name in want:
        np.testing.assert_allclose(got[name].numpy(), want[name].numpy(), rtol=2e-5, atol=2e-5)


def test_halves_of_units_give_the_same_bits_with_or_without_the_helper(monkeypatch):
    """The helper's half of every step is the caller's code on the same data: a layer run with
    the helper taking halves, and with ``ND4PY_WORKERS=1``'s serial halves, agree bit for
    bit, and an example past its length keeps its state."""
    from samediff.kernels import recurrent as kernels
    from samediff.kernels import workers
    steps, hidden = 64, 128
    zx, R = f32(4, steps, 1, hidden), f32(hidden, 4 * hidden) * 0.1

    def run_layer():
        hs, cs = np.zeros((2, steps + 1, 1, hidden), np.float32)
        ys = np.empty((steps, 1, hidden), np.float32)
        tape = [np.empty((steps, 4, 1, hidden), np.float32),
                np.empty((steps, 1, hidden), np.float32), np.empty((steps, 1, hidden), np.float32)]
        kernels.forward(zx, R, np.zeros((3, hidden), np.float32), np.array([50]), np.inf, hs,
                        cs, ys, None, *tape, True)
        return ys, hs, cs, *tape
    assert kernels.by_units(steps, 1, hidden)
    both = run_layer()
    monkeypatch.setattr(workers, "_ENABLED", False)
    serial = run_layer()
    for a, b in zip(both, serial):
        assert np.array_equal(a, b)
    assert not np.any(both[0][50:]) and np.array_equal(both[1][51:], both[1][50:-1])


def test_the_input_gradient_is_computed_only_when_something_needs_it():
    """The gradient op computes every input's gradient at once; autodiff tells it
    (``registry.needs_gradient``) when the sequence needs none -- a placeholder in training --
    and it skips that product (``dzx @ W^T``, a quarter of the step's GEMM work in W8)."""
    from samediff import SameDiff
    import nd4py as nd
    rng = np.random.default_rng(5)
    xs = rng.normal(size=(T, B, I)).astype(np.float32)
    W, R = (rng.normal(size=shape).astype(np.float32) * 0.5 for shape in ((I, 4 * H),
                                                                           (H, 4 * H)))

    def build():
        sd = SameDiff.create()
        x = sd.placeholder("x", nd.FLOAT, T, B, I)
        w, r = sd.var("W", W.copy()), sd.var("R", R.copy())
        y, h, _ = sd.rnn.lstm_layer(x, w, r)
        ((y * y).sum() + h.sum()).mark_as_loss()
        return sd

    def grad_nodes(sd):
        return [n.attrs.input_grad for n in sd.graph.nodes if n.op.name == "lstm_layer_grad"]
    only_w, with_x = build(), build()
    got = only_w.calculate_gradients({"x": xs}, "W")
    assert grad_nodes(only_w) == [False]
    want = with_x.calculate_gradients({"x": xs}, "W", "x")
    assert grad_nodes(with_x) == [True]
    np.testing.assert_array_equal(got["W"].numpy(), want["W"].numpy())
    assert np.abs(want["x"].numpy()).max() > 0
