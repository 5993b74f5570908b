"""The recurrent layers (``lstm_layer``, ``gru_layer``, ``rnn_layer``) against PyTorch's
``nn.LSTM``, ``nn.GRU`` and ``nn.RNN``: outputs and last states, unidirectional and
bidirectional, both time layouts, packed (variable-length) sequences, and the gradients of
every input through SameDiff, float64. PyTorch is never a dependency: this file is skipped
unless it is installed (run it in a separate environment: ``PYTHONPATH=. python -m pytest
tests/test_recurrent_vs_torch.py``).

Our weights are PyTorch's transposed (``W = weight_ih_l0.T``, ``R = weight_hh_l0.T``), the
split bias is ``b_ih`` then ``b_hh``, and a bidirectional layer stacks the forward and the
``_reverse`` parameters on a leading axis of 2."""
from __future__ import annotations

import numpy as np
import pytest

import nd4py as nd
from samediff import SameDiff

torch = pytest.importorskip("torch")
nn = torch.nn
pack_padded_sequence = nn.utils.rnn.pack_padded_sequence
pad_packed_sequence = nn.utils.rnn.pad_packed_sequence
RNG = np.random.default_rng(43)
STEPS, BATCH, N_IN, HIDDEN = 5, 3, 4, 6
LENGTHS = np.array([5, 2, 3], dtype=np.int64)
#: case -> (our op, PyTorch's module and its keywords, our extra attributes)
CASES = {
    "lstm": ("lstm", nn.LSTM, {}, {"gate_order": "pytorch"}),
    "gru": ("gru", nn.GRU, {}, {"gate_order": "pytorch", "linear_before_reset": True}),
    "rnn_tanh": ("rnn", nn.RNN, {"nonlinearity": "tanh"}, {}),
    "rnn_relu": ("rnn", nn.RNN, {"nonlinearity": "relu"}, {"activations": ("relu",)}),
}


def _module(case: str, bidir: bool, batch_first: bool):
    """PyTorch's layer in float64 with random parameters (not its small default init)."""
    _, cls, kw, _ = CASES[case]
    module = cls(N_IN, HIDDEN, bidirectional=bidir, batch_first=batch_first, **kw).double()
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.tensor(RNG.normal(scale=0.5, size=tuple(p.shape))))
    return module


def _weights(module, bidir: bool) -> dict[str, np.ndarray]:
    """The module's parameters in our layout: ``W``, ``R``, ``b`` (split: ``b_ih, b_hh``)."""
    suffixes = ("", "_reverse") if bidir else ("",)

    def get(name, suffix):
        return getattr(module, f"{name}_l0{suffix}").detach().numpy()
    per_dir = [{"W": get("weight_ih", s).T, "R": get("weight_hh", s).T,
                "b": np.concatenate([get("bias_ih", s), get("bias_hh", s)])} for s in suffixes]
    if not bidir:
        return {k: v.copy() for k, v in per_dir[0].items()}
    return {k: np.stack([d[k] for d in per_dir]) for k in per_dir[0]}


def _inputs(case: str, bidir: bool, batch_first: bool):
    """x in the module's layout and the initial states ``[dirs, batch, hidden]`` (PyTorch's)."""
    x = RNG.normal(size=(BATCH, STEPS, N_IN) if batch_first else (STEPS, BATCH, N_IN))
    states = [RNG.normal(size=(2 if bidir else 1, BATCH, HIDDEN))
              for _ in range(2 if case == "lstm" else 1)]
    return x, states


def _ours_states(states, bidir):
    return [s if bidir else s[0] for s in states]


def _attrs(case: str, bidir: bool, fmt: str) -> dict:
    return {"data_format": fmt, "direction": "bidir_concat" if bidir else "fwd", **CASES[case][3]}


def _call(ns, case, x, w, states, seq_len, attrs):
    """Our layer through the ``rnn`` namespace ``ns`` (``nd.rnn`` or ``sd.rnn``)."""
    names = ("h0", "c0")[:len(states)]
    layer = getattr(ns, f"{CASES[case][0]}_layer")
    return layer(x, w["W"], w["R"], b=w["b"], seq_len=seq_len, **dict(zip(names, states)),
                 **attrs)


def _torch_run(module, x, states, lengths=None, batch_first=False):
    """PyTorch's ``(y, h_n[, c_n])``, y padded with zeros when ``lengths`` is given."""
    tx = torch.tensor(x) if not isinstance(x, torch.Tensor) else x
    hidden = tuple(states) if len(states) == 2 else states[0]
    if lengths is None:
        y, last = module(tx, hidden)
    else:
        packed = pack_padded_sequence(tx, torch.tensor(lengths), batch_first=batch_first,
                                      enforce_sorted=False)
        y, last = module(packed, hidden)
        y, _ = pad_packed_sequence(y, batch_first=batch_first, total_length=STEPS)
    return (y, *(last if isinstance(last, tuple) else (last,)))


def _assert_outputs(ours, want, bidir, tol=1e-10):
    assert len(ours) == len(want)
    for got, expected in zip(ours, want):
        expected = expected.detach().numpy()
        got = got.numpy()
        if got.ndim == 2 and not bidir:  # (a last state: ours [batch, hidden])
            expected = expected[0]
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("fmt", ["NTS", "TNS"])
@pytest.mark.parametrize("bidir", [False, True], ids=["fwd", "bidir"])
@pytest.mark.parametrize("case", list(CASES))
def test_layer_matches_torch(case, bidir, fmt):
    module = _module(case, bidir, batch_first=fmt == "NTS")
    x, states = _inputs(case, bidir, fmt == "NTS")
    w = _weights(module, bidir)
    ours = _call(nd.rnn, case, nd.create(x), {k: nd.create(v) for k, v in w.items()},
                 [nd.create(s) for s in _ours_states(states, bidir)], None,
                 _attrs(case, bidir, fmt))
    with torch.no_grad():
        want = _torch_run(module, x, [torch.tensor(s) for s in states])
    _assert_outputs(ours, want, bidir)


@pytest.mark.parametrize("fmt", ["NTS", "TNS"])
@pytest.mark.parametrize("case", list(CASES))
def test_packed_sequences_match_torch(case, fmt):
    """Per-example lengths: zeros past each example's end, its last state at its last step,
    the backward direction over each example's valid steps only."""
    module = _module(case, True, batch_first=fmt == "NTS")
    x, states = _inputs(case, True, fmt == "NTS")
    w = _weights(module, True)
    ours = _call(nd.rnn, case, nd.create(x), {k: nd.create(v) for k, v in w.items()},
                 [nd.create(s) for s in states], nd.create(LENGTHS), _attrs(case, True, fmt))
    with torch.no_grad():
        want = _torch_run(module, x, [torch.tensor(s) for s in states], LENGTHS,
                          batch_first=fmt == "NTS")
    _assert_outputs(ours, want, True)
    y = ours[0].numpy() if fmt == "NTS" else ours[0].numpy().transpose(1, 0, 2)
    for b, n in enumerate(LENGTHS):
        assert not y[b, n:].any()


@pytest.mark.parametrize("case, bidir, packed", [
    ("lstm", True, True), ("lstm", False, False), ("gru", True, True), ("gru", False, False),
    ("gru", True, False), ("rnn_tanh", True, True)])
def test_gradients_match_torch(case, bidir, packed):
    """d/d(x, W, R, b, h0[, c0]) of ``sum(y * G) + sum(h_last * Gh) [+ sum(c_last * Gc)]``."""
    fmt = "NTS"
    module = _module(case, bidir, batch_first=True)
    x, states = _inputs(case, bidir, True)
    w = _weights(module, bidir)
    lengths = LENGTHS if packed else None
    dirs = 2 if bidir else 1
    g_y = RNG.normal(size=(BATCH, STEPS, dirs * HIDDEN))
    g_states = [RNG.normal(size=(dirs, BATCH, HIDDEN)) for _ in states]

    # PyTorch, autograd
    tx = torch.tensor(x, requires_grad=True)
    t_states = [torch.tensor(s, requires_grad=True) for s in states]
    outs = _torch_run(module, tx, t_states, lengths, batch_first=True)
    loss = sum((o * torch.tensor(g)).sum() for o, g in zip(outs, [g_y, *g_states]))
    loss.backward()

    # ours, SameDiff
    sd = SameDiff.create()
    state_names = ("h0", "c0")[:len(states)]
    v_x = sd.var("x", x)
    v_w = {k: sd.var(k, v) for k, v in w.items()}
    v_states = [sd.var(n, s) for n, s in zip(state_names, _ours_states(states, bidir))]
    v_len = sd.constant("seq_len", lengths) if packed else None
    ours = _call(sd.rnn, case, v_x, v_w, v_states, v_len, _attrs(case, bidir, fmt))
    total = None
    for k, (o, g) in enumerate(zip(ours, [g_y, *_ours_states(g_states, bidir)])):
        term = (o * sd.constant(f"G{k}", g)).sum()
        total = term if total is None else total + term
    total.mark_as_loss()
    grads = sd.calculate_gradients({}, "x", "W", "R", "b", *state_names)

    def t_grad(name, suffix):
        return getattr(module, f"{name}_l0{suffix}").grad.numpy()
    suffixes = ("", "_reverse") if bidir else ("",)
    want = {"x": tx.grad.numpy(),
            "W": [t_grad("weight_ih", s).T for s in suffixes],
            "R": [t_grad("weight_hh", s).T for s in suffixes],
            "b": [np.concatenate([t_grad("bias_ih", s), t_grad("bias_hh", s)])
                  for s in suffixes]}
    for name in ("W", "R", "b"):
        want[name] = np.stack(want[name]) if bidir else want[name][0]
    for n, t in zip(state_names, t_states):
        want[n] = t.grad.numpy() if bidir else t.grad.numpy()[0]
    for name, expected in want.items():
        got = grads[name].numpy()
        assert got.shape == expected.shape, name
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9, err_msg=name)
