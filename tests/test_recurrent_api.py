"""The recurrent layers' call forms (``sd.rnn`` / ``nd.rnn``) and behaviours a table row
cannot express: ND4J's ``lstmLayer`` with its config objects, ``gru``, the cells written with
table ops, named errors, tracing and compiling.

The layers' values and gradients are table rows (``tests/op_samples_recurrent.py``); PyTorch's
``nn.LSTM``/``nn.GRU``/``nn.RNN`` are compared in ``test_recurrent_vs_torch.py``.
"""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff
from samediff.errors import OpError
from samediff.frontends.rnn import (GRUWeights, LSTMConfiguration, LSTMLayerConfig,
                                    LSTMLayerWeights, LSTMWeights)
from samediff.gradcheck import check_gradients

RNG = np.random.default_rng(5)
T, B, I, H = 4, 3, 2, 3


def r(*shape):
    return RNG.normal(size=shape)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def test_lstm_layer_nd4j_form_maps_c_last_y_last_and_lengths():
    x, w, rw, b, p = r(B, T, I), r(I, 4 * H), r(H, 4 * H), r(4 * H), r(3 * H)
    c0, h0, lengths = r(B, H), r(B, H), np.array([4, 1, 2])
    weights = LSTMLayerWeights(weights=w, rWeights=rw, peepholeWeights=p, bias=b)
    config = (LSTMLayerConfig.builder().lstmdataformat("NTS").directionMode("BWD")
              .retFullSequence(True).retLastH(True).retLastC(True).build())
    got = nd.rnn.lstmLayer(x, c0, h0, lengths, weights, config)
    want = nd.rnn.lstm_layer(x, w, rw, b, lengths, h0, c0, p, data_format="NTS",
                             direction="bwd")
    assert len(got) == 3
    for g, e in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), e.numpy())


def test_lstm_layer_returns_what_the_config_asks_for():
    x, weights = r(T, B, I), LSTMLayerWeights(r(I, 4 * H), r(H, 4 * H))
    y, h, c = nd.rnn.lstm_layer(x, weights.weights, weights.rWeights)
    (only_c,) = nd.rnn.lstmLayer(x, weights, LSTMLayerConfig(retFullSequence=False,
                                                             retLastC=True))
    np.testing.assert_array_equal(only_c.numpy(), c.numpy())
    np.testing.assert_array_equal(y.numpy()[-1], h.numpy())  # all steps: the last one is h
    with pytest.raises(OpError, match="would return nothing"):
        nd.rnn.lstmLayer(x, weights, LSTMLayerConfig(retFullSequence=False))
    with pytest.raises(OpError, match="expected one LSTMLayerWeights"):
        nd.rnn.lstmLayer(x, LSTMLayerConfig())
    with pytest.raises(OpError, match="cLast, yLast, maxTSLength"):
        nd.rnn.lstmLayer(x, x, weights, LSTMLayerConfig())


def test_lstm_layer_config_activations_and_clip_reach_the_op():
    x, w, rw = r(T, B, I), r(I, 4 * H), r(H, 4 * H)
    config = LSTMLayerConfig(gateAct="HARD_SIGMOID", gateAlpha=0.25, gateBeta=0.5,
                             cellAct="SOFTSIGN", cellClip=0.3, retLastC=True)
    y, c = nd.rnn.lstmLayer(x, LSTMLayerWeights(w, rw), config)
    _, _, c_kw = nd.rnn.lstm_layer(x, w, rw, activations=(("hard_sigmoid", 0.25, 0.5),
                                                          "softsign", "tanh"), cell_clip=0.3)
    np.testing.assert_array_equal(c.numpy(), c_kw.numpy())
    assert np.abs(c.numpy()).max() <= 0.3


def test_samediff_lstm_layer_names_its_outputs_and_runs_any_batch():
    sd = SameDiff.create()
    x = sd.placeholder("x", nd.DOUBLE, -1, -1, I)
    weights = LSTMLayerWeights(sd.var("W", r(I, 4 * H)), sd.var("R", r(H, 4 * H)))
    y, h = sd.rnn.lstmLayer("lstm", x, weights, LSTMLayerConfig(retLastH=True))
    assert (y.name, y.shape) == ("lstm", (-1, -1, H))
    for steps, batch in ((4, 3), (2, 5)):
        out = sd.output({"x": r(steps, batch, I)}, "lstm", h.name)
        assert out["lstm"].shape == (steps, batch, H) and out[h.name].shape == (batch, H)


def test_gru_nd4j_form_is_the_gru_layer_with_h_last():
    x, h0, wx, wh, b = r(T, B, I), r(B, H), r(I, 3 * H), r(H, 3 * H), r(3 * H)
    y = nd.rnn.gru(x, h0, wx, wh, b)
    want, _ = nd.rnn.gru_layer(x, wx, wh, b, h0=h0)
    np.testing.assert_array_equal(y.numpy(), want.numpy())
    # ND4J's formula: h' = u * h + (1 - u) * tanh(x Wc + (r * h) Rc + bc), gates r, u, c
    h = h0
    for t in range(T):
        zx = x[t] @ wx + b
        rg = sigmoid(zx[:, :H] + h @ wh[:, :H])
        ug = sigmoid(zx[:, H:2 * H] + h @ wh[:, H:2 * H])
        c = np.tanh(zx[:, 2 * H:] + (rg * h) @ wh[:, 2 * H:])
        h = ug * h + (1 - ug) * c
        np.testing.assert_allclose(y.numpy()[t], h, rtol=1e-12, atol=1e-13)


def _gru_cell_ref(x, h, w):
    ru = sigmoid(np.concatenate([x, h], 1) @ w.ruWeight + w.ruBias)
    rg, ug = ru[:, :H], ru[:, H:]
    c = np.tanh(np.concatenate([x, rg * h], 1) @ w.cWeight + w.cBias)
    return rg, ug, c, ug * h + (1 - ug) * c


def test_gru_cell_matches_its_definition():
    x, h = r(B, I), r(B, H)
    w = GRUWeights(r(I + H, 2 * H), r(I + H, H), r(2 * H), r(H))
    for got, want in zip(nd.rnn.gruCell(x, h, w), _gru_cell_ref(x, h, w)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-13)


def test_lstm_cell_matches_nd4j_block_cell():
    x, c_last, y_last = r(B, I), r(B, H), r(B, H)
    w = LSTMWeights(r(I + H, 4 * H), r(H), r(H), r(H), r(4 * H))
    cfg = LSTMConfiguration(peepHole=True, forgetBias=1.0, clippingCellValue=0.8)
    got = nd.rnn.lstmCell(x, c_last, y_last, w, cfg)
    pre = np.concatenate([x, y_last], 1) @ w.ruWeight + w.bias
    zi, zz, zf, zo = (pre[:, k * H:(k + 1) * H] for k in range(4))
    i = sigmoid(zi + w.inputPeepholeWeights * c_last)
    f = sigmoid(zf + 1.0 + w.forgetPeepholeWeights * c_last)
    z = np.tanh(zz)
    c = np.clip(f * c_last + i * z, -0.8, 0.8)
    o = sigmoid(zo + w.outputPeepholeWeights * c)
    want = (i, c, f, o, z, np.tanh(c), o * np.tanh(c))
    assert len(got) == 7
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-12, atol=1e-13)


def test_cells_differentiate_twice():
    """The cells are table ops: their gradients are graphs, differentiable again."""
    sd = SameDiff.create()
    x, h = sd.var("x", r(B, I)), sd.var("h", r(B, H))
    w = GRUWeights(sd.var("ru", r(I + H, 2 * H)), sd.var("c", r(I + H, H)),
                   sd.var("rub", r(2 * H)), sd.var("cb", r(H)))
    *_, h_new = sd.rnn.gruCell(x, h, w)
    (h_new * h_new).sum().mark_as_loss()
    assert check_gradients(sd).passed
    fn = nd.grad(lambda v: nd.grad(lambda u: nd.rnn.gruCell(
        u, nd.create(np.ones((B, H))), GRUWeights(np.ones((I + H, 2 * H)) * 0.1,
                                                  np.ones((I + H, H)) * 0.2))[3].sum())(v)
        .sum())
    second = fn(nd.create(r(B, I))).numpy()
    assert second.shape == (B, I) and np.isfinite(second).all()


@pytest.mark.parametrize("call, match", [
    (lambda: nd.rnn.lstm_layer(r(T, B, I), r(I, 4 * H), r(H, 3 * H)), "weights do not fit"),
    (lambda: nd.rnn.lstm_layer(r(T, B, I), r(I + 1, 4 * H), r(H, 4 * H)),
     "weights do not fit"),
    (lambda: nd.rnn.lstm_layer(r(T, B, I), r(I, 4 * H), r(H, 4 * H), h0=r(B + 1, H)),
     r"h0 must have shape \(3, 3\)"),
    (lambda: nd.rnn.gru_layer(r(T, B, I), r(I, 3 * H), r(H, 3 * H),
                              seq_len=np.array([1, 5, 2])), r"seq_len must be in \[0, 4\]"),
    (lambda: nd.rnn.gru_layer(r(T, B, I), r(I, 3 * H), r(H, 3 * H),
                              seq_len=np.array([1.0, 2.0, 2.0])), "seq_len must be integers"),
    (lambda: nd.rnn.rnn_layer(r(T, B, I), r(I, H), r(H, H), direction="bidir_sum"),
     "bidirectional"),
    (lambda: nd.rnn.lstm_layer(r(T, B, I), r(2, I, 4 * H), r(2, H, 4 * H),
                               direction="bidir_extra_dim"), "goes with data_format T2NS"),
    (lambda: nd.rnn.lstm_layer(r(T, B, I), r(I, 4 * H).astype(np.float32), r(H, 4 * H)),
     "give every weight x's dtype"),
    (lambda: nd.rnn.lstm_layer(r(T, B, I), r(I, 4 * H), r(H, 4 * H), given=("b",)),
     "`given` follows from them"),
    (lambda: nd.rnn.lstm_layer(r(T, B, I), r(I, 4 * H), r(H, 4 * H), activations="tanh"),
     "expected 3 activations"),
    (lambda: nd.rnn.gru_layer(r(T, B, I), r(I, 3 * H), r(H, 3 * H), gate_order="iofc"),
     "rzn"),
])
def test_bad_inputs_name_the_op_and_the_fix(call, match):
    with pytest.raises(OpError, match=match):
        call()


def test_traced_and_compiled_layers_equal_eager():
    x, w, rw, b = r(T, B, I), r(I, 4 * H), r(H, 4 * H), r(8 * H)

    def f(x, w):
        y, h, c = nd.rnn.lstm_layer(x, w, rw, b, direction="fwd")
        return y.tanh().sum() + h.sum() * c.sum()
    eager = f(nd.create(x), nd.create(w)).item()
    compiled = nd.compile(f)
    assert compiled(nd.create(x), nd.create(w)).item() == pytest.approx(eager, rel=1e-12)
    grad = nd.compile(nd.grad(f))(nd.create(x), nd.create(w)).numpy()
    assert grad.shape == x.shape and np.isfinite(grad).all()
    with nd.graph_scope():
        traced = f(nd.create(x), nd.create(w))
    assert traced.item() == pytest.approx(eager, rel=1e-12)


def test_the_rnn_namespace_shows_its_ops_and_forms_only():
    """The cells call table ops of other groups (matmul, split...) through the namespace; that
    must not make them appear on it."""
    nd.rnn.gruCell(r(B, I), r(B, H), GRUWeights(r(I + H, 2 * H), r(I + H, H)))
    with pytest.raises(AttributeError, match="has no op 'matmul'"):
        nd.rnn.matmul
    assert {"lstm_layer", "lstmLayer", "gru", "gruCell", "lstmCell"} <= set(dir(nd.rnn))
    assert "matmul" not in dir(nd.rnn)
