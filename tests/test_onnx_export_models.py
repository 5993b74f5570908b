"""Whole models through ``sd.to_onnx``: a 1-D CNN and a convolutional autoencoder with a
transposed convolution, an LSTM classifier (and a bidirectional GRU tagger), a transformer
block with attention, and a model with ``cond`` and ``while_loop``. Each is exported (which
runs ``onnx.checker``'s full check), run under ``onnx.reference`` and compared with nd4py,
then imported back and compared again, for two batch sizes where the batch is a run-time
dim."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx.reference import ReferenceEvaluator

from samediff import SameDiff
from samediff.control import cond, scan, while_loop
from samediff.onnx import import_onnx

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _round_trip(sd: SameDiff, feeds_list: list[dict], outputs: list[str],
                rtol: float = 2e-5, atol: float = 2e-6, opset: int = 17,
                import_back: bool = True) -> onnx.ModelProto:
    """Export, then for each feed compare onnx.reference's and the re-imported model's
    results with nd4py's."""
    model = sd.to_onnx(opset=opset, outputs=outputs)
    onnx.checker.check_model(model, full_check=True)
    ref = ReferenceEvaluator(model)
    back = import_onnx(model) if import_back else None
    for feeds in feeds_list:
        want = sd.output(feeds, *outputs)
        got = ref.run(None, feeds)
        again = back.output(feeds, *outputs) if back is not None else None
        for k, name in enumerate(outputs):
            w = np.asarray(want[name].numpy())
            assert got[k].shape == w.shape and got[k].dtype == w.dtype, (name, got[k].shape)
            np.testing.assert_allclose(got[k], w, rtol=rtol, atol=atol, err_msg=name)
            if again is not None:
                np.testing.assert_allclose(np.asarray(again[name].numpy()), w, rtol=rtol,
                                           atol=atol, err_msg=name)
    return model


def _ops(model) -> set[str]:
    found = set()

    def walk(graph):
        for n in graph.node:
            found.add(n.op_type)
            for a in n.attribute:
                if a.HasField("g"):
                    walk(a.g)
    walk(model.graph)
    return found


def _w(rng, *shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def test_a_1d_cnn_classifier():
    rng = np.random.default_rng(0)
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1, 3, 16)  # NCW
    h = sd.cnn.conv1d(x, sd.var("w1", _w(rng, 3, 3, 8)), sd.var("b1", _w(rng, 8)),
                      padding="same")
    h = sd.cnn.max_pooling1d(sd.nn.relu(h), kernel=2, stride=2)
    h = sd.cnn.conv1d(h, sd.var("w2", _w(rng, 3, 8, 8)), stride=2, dilation=1, padding=1)
    h = sd.cnn.avg_pooling1d(sd.nn.relu(h), kernel=2, stride=2)
    h = sd.cnn.global_avg_pooling(h, data_format="NCW")
    sd.nn.softmax(sd.nn.linear(h, sd.var("wo", _w(rng, 8, 4)), sd.var("bo", _w(rng, 4))),
                  dim=-1).rename("p")
    model = _round_trip(sd, [{"x": _w(rng, n, 3, 16, scale=1.0)} for n in (1, 3)], ["p"])
    assert {"Conv", "MaxPool", "AveragePool"} <= _ops(model)


def test_a_convolutional_autoencoder_with_a_transposed_convolution():
    rng = np.random.default_rng(1)
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1, 8, 8, 2)  # NHWC
    h = sd.cnn.conv2d(x, sd.var("we", _w(rng, 3, 3, 2, 6)), sd.var("be", _w(rng, 6)),
                      stride=2, padding="same", data_format="NHWC")
    h = sd.cnn.depthwise_conv2d(sd.nn.relu(h), sd.var("wd", _w(rng, 3, 3, 6, 1)),
                                padding=1, data_format="NHWC")
    y = sd.cnn.deconv2d(sd.nn.relu(h), sd.var("wt", _w(rng, 3, 3, 2, 6)),
                        sd.var("bt", _w(rng, 2)), stride=2, padding="same",
                        data_format="NHWC")
    sd.nn.sigmoid(sd.cnn.upsampling2d(y, scale=1, data_format="NHWC")).rename("recon")
    model = _round_trip(sd, [{"x": _w(rng, n, 8, 8, 2, scale=1.0)} for n in (1, 2)],
                        ["recon"])
    assert {"Conv", "ConvTranspose"} <= _ops(model)


def test_an_lstm_classifier():
    """A time-major LSTM (nd4py's default gate order i, f, g, o, permuted to ONNX's i, o, f,
    c) whose last hidden state is classified."""
    rng = np.random.default_rng(2)
    hidden, n_in, steps = 5, 3, 6
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", steps, -1, n_in)
    W = sd.var("W", _w(rng, n_in, 4 * hidden))
    R = sd.var("R", _w(rng, hidden, 4 * hidden))
    b = sd.var("b", _w(rng, 8 * hidden))
    _, h_last, c_last = sd.rnn.lstm_layer(x, W, R, b=b)
    logits = sd.nn.linear(h_last, sd.var("wo", _w(rng, hidden, 3)), sd.var("bo", _w(rng, 3)))
    sd.nn.log_softmax(logits, dim=-1).rename("logp")
    sd.math.tanh(c_last).rename("c")
    model = _round_trip(sd, [{"x": _w(rng, steps, n, n_in, scale=1.0)} for n in (1, 4)],
                        ["logp", "c"], rtol=1e-4, atol=1e-5)
    assert "LSTM" in _ops(model)


def test_a_bidirectional_gru_tagger():
    rng = np.random.default_rng(3)
    hidden, n_in, steps = 4, 3, 5
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", -1, steps, n_in)  # NTS
    outs = sd.rnn.gru_layer(x, sd.var("W", _w(rng, 2, n_in, 3 * hidden)),
                            sd.var("R", _w(rng, 2, hidden, 3 * hidden)),
                            b=sd.var("b", _w(rng, 2, 6 * hidden)),
                            data_format="NTS", direction="bidir_concat",
                            linear_before_reset=True)
    sd.nn.softmax(sd.nn.linear(outs[0], sd.var("wo", _w(rng, 2 * hidden, 3))),
                  dim=-1).rename("tags")
    model = _round_trip(sd, [{"x": _w(rng, n, steps, n_in, scale=1.0)} for n in (1, 2)],
                        ["tags"], rtol=1e-4, atol=1e-5)
    assert "GRU" in _ops(model)


def test_a_transformer_block():
    """Pre-norm self-attention (causal, two heads) and a GELU feed-forward, residuals."""
    rng = np.random.default_rng(4)
    batch, length, d, heads = 2, 5, 8, 2
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", batch, length, d)
    gain, bias = sd.var("g1", np.ones(d, np.float32)), sd.var("c1", np.zeros(d, np.float32))
    h = sd.nn.layer_norm(x, gain, bias, dims=(-1,))

    def split_heads(t):  # [B, L, D] -> [B, H, L, D / H]
        return sd.permute(sd.reshape(t, batch, length, heads, d // heads), 0, 2, 1, 3)
    q, k, v = (split_heads(sd.nn.linear(h, sd.var(f"w{n}", _w(rng, d, d))))
               for n in "qkv")
    att = sd.nn.scaled_dot_product_attention(q, k, v, is_causal=True)
    att = sd.reshape(sd.permute(att, 0, 2, 1, 3), batch, length, d)
    x1 = x + sd.nn.linear(att, sd.var("wo", _w(rng, d, d)))
    h2 = sd.nn.layer_norm(x1, sd.var("g2", np.ones(d, np.float32)),
                          sd.var("c2", np.zeros(d, np.float32)), dims=(-1,))
    ff = sd.nn.linear(sd.nn.gelu(sd.nn.linear(h2, sd.var("f1", _w(rng, d, 16)))),
                      sd.var("f2", _w(rng, 16, d)))
    (x1 + ff).rename("out")
    model = _round_trip(sd, [{"x": _w(rng, batch, length, d, scale=1.0)}], ["out"],
                        rtol=1e-4, atol=1e-5)
    assert {"Softmax", "MatMul", "LayerNormalization"} <= _ops(model)


def test_nd4j_multi_head_attention():
    rng = np.random.default_rng(5)
    sd = SameDiff.create()
    q = sd.placeholder("q", "float", -1, 4, 3)  # [batch, nIn, T]
    kv = sd.placeholder("kv", "float", -1, 4, 5)
    mask = sd.placeholder("mask", "int64", -1, 5)
    sd.nn.multi_head_dot_product_attention(
        q, kv, kv, sd.var("Wq", _w(rng, 2, 3, 4)), sd.var("Wk", _w(rng, 2, 3, 4)),
        sd.var("Wv", _w(rng, 2, 2, 4)), sd.var("Wo", _w(rng, 4, 6)), mask).rename("y")
    feeds = [{"q": _w(rng, n, 4, 3, scale=1.0), "kv": _w(rng, n, 4, 5, scale=1.0),
              "mask": np.tile(np.array([1, 1, 0, 1, 0], np.int64), (n, 1))} for n in (1, 3)]
    _round_trip(sd, feeds, ["y"], rtol=1e-4, atol=1e-5)


def test_a_model_with_cond_and_while_loop():
    """``cond`` picks a branch on the data (ONNX ``If``, its operands read from the outer
    scope); ``while_loop`` doubles until the sum passes a bound read from outside the loop
    (a captured value: ONNX ``Loop`` with an outer-scope input)."""
    rng = np.random.default_rng(6)
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", 3)
    bound = sd.placeholder("bound", "float")
    w = sd.var("w", _w(rng, 3))
    y = cond(x.sum() > 0.0, lambda a, b: a * b + 1.0, lambda a, b: a - b, x, w)
    count = sd.constant("zero", np.asarray(0.0, np.float32))
    total, steps = while_loop(lambda v: v[0].abs().sum() < bound,
                              lambda v: (v[0] * 2.0 + 0.5, v[1] + 1.0), (y, count))
    total.rename("total")
    steps.rename("steps")
    feeds = [{"x": _w(rng, 3, scale=1.0), "bound": np.asarray(b, np.float32)}
             for b in (10.0, 1000.0)]
    feeds.append({"x": -np.ones(3, np.float32), "bound": np.asarray(0.0, np.float32)})
    model = _round_trip(sd, feeds, ["total", "steps"])
    assert {"If", "Loop"} <= _ops(model)


def test_a_scan_over_a_sequence():
    """``scan`` (a running state over the rows of a sequence, per-step outputs) is ONNX
    ``Scan``; reversed, the sequence is sliced backwards around it."""
    rng = np.random.default_rng(7)
    for reverse in (False, True):
        sd = SameDiff.create()
        xs = sd.placeholder("xs", "float", 6, 3)
        w = sd.var("w", _w(rng, 3, 3))
        def step(c, row, sd=sd, w=w):
            return (sd.math.tanh(c.mmul(w) + row),) * 2
        final, ys = scan(step,
                         sd.constant("h0", np.zeros((1, 3), np.float32)),
                         sd.reshape(xs, 6, 1, 3), reverse=reverse)
        final.rename("final")
        ys.rename("ys")
        model = _round_trip(sd, [{"xs": _w(rng, 6, 3, scale=1.0)}], ["final", "ys"])
        assert "Scan" in _ops(model)


def test_nested_control_flow():
    """A ``cond`` inside a ``while_loop`` body reading a value captured from the outermost
    graph: the If's branches read the Loop body's values and the main graph's by name.
    (Checked under onnx.reference only: the importer cannot yet read an If nested in a Loop
    body that reads the main graph's values -- it records them in the wrong graph.)"""
    rng = np.random.default_rng(8)
    sd = SameDiff.create()
    x = sd.placeholder("x", "float", 4)
    w = sd.var("w", _w(rng, 4, scale=1.0))

    def step(v):
        c, n = v
        grown = cond(c.sum() > 0.0, lambda a, b: a * 1.5 + b, lambda a, b: a - b * 0.5, c, w)
        return grown, n + 1.0
    total, steps = while_loop(lambda v: v[1] < 5.0, step,
                              (x, sd.constant("zero", np.asarray(0.0, np.float32))))
    total.rename("total")
    steps.rename("steps")
    model = _round_trip(sd, [{"x": _w(rng, 4, scale=1.0)} for _ in range(3)],
                        ["total", "steps"], import_back=False)
    assert {"If", "Loop"} <= _ops(model)
