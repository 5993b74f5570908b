"""Recurrent layers: ``lstm_layer``, ``gru_layer`` and ``rnn_layer``, one driver for all three.

Each op runs a cell of ``recurrent_cells.py`` over a sequence. Inputs, after ``x``, ``W``
``[nIn, gates * hidden]`` and ``R [hidden, gates * hidden]``, are the optional ones the
``given`` attribute names, in ND4J's ``lstmLayer`` order: ``b`` (``[gates * hidden]``, or
``[2 * gates * hidden]``: input and recurrent biases, ONNX's ``B`` and PyTorch's ``b_ih,
b_hh``), ``seq_len`` (``[batch]`` integers: example b's steps ``t >= seq_len[b]`` give zeros
and leave its state alone), ``h0``, ``c0`` (LSTM) and ``peephole`` (LSTM, ``[3 * hidden]``).
Bidirectional layers take each of these with a leading 2 (forward, backward).

Attributes (ND4J's ``LSTMLayerConfig`` and ONNX's ``LSTM``/``GRU``/``RNN``):

* ``data_format``: ``TNS`` (``[time, batch, nIn]``), ``NTS``, ``NST`` or ``T2NS`` (input as
  TNS, output ``[time, directions, batch, hidden]``: ONNX's ``Y``);
* ``direction``: ``fwd``, ``bwd`` (each example's steps ``seq_len[b] - 1 ... 0``),
  ``bidir_sum``, ``bidir_concat`` (features ``[forward, backward]``), ``bidir_extra_dim``
  (needs T2NS);
* ``gate_order``: the order of the gate blocks in W, R, b and the peepholes — LSTM ``ifco``
  (ND4J's and PyTorch's ``i, f, g, o``) or ``iofc`` (ONNX's, peepholes ``i, o, f``); GRU ``rzn``
  (ND4J's ``r, u, c`` and PyTorch's) or ``zrn`` (ONNX's ``z, r, h``); ``nd4j``, ``pytorch``
  and ``onnx`` name them too;
* ``activations`` (ONNX's list: LSTM gate, cell, output; GRU gate, candidate; RNN one),
  each a name or ``(name, alpha, beta)``; ``cell_clip`` (LSTM, ND4J's: the cell state is
  clipped to ``[-cell_clip, cell_clip]``, 0 = never); ``linear_before_reset`` (GRU: PyTorch's
  form).

Outputs: ``y`` (every step's hidden state in ``data_format``), ``h_last`` (``[batch, hidden]``,
``[2, batch, hidden]`` when bidirectional: each example's state after its last step) and, for
the LSTM, ``c_last``. The input projection of the whole sequence is one GEMM; then float32
LSTMs with the default activations run compiled time loops (``kernels/recurrent.py``, from
``KERNEL_MIN_WORK``), everything else a GEMM with R and the gate math in numpy per step. The
gradient (op ``<cell>_layer_grad``) reads the forward's tape from its workspace (the LSTM's
``keep_workspace`` output, which autodiff turns on: ``OpDef.workspace``) or runs the sequence
again keeping each step's gates, then goes back through time; it is not differentiable again.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, NamedTuple

import numpy as np

from ..errors import GradientError, OpError
from ..kernels import forksafe, lazy
from .call import op
from .cnn_attrs import choice
from .families import Attr
from .recurrent_cells import CELLS, Grads, StepWeights, activations_kind
from .registry import AttrKind, TensorType, define, needs_gradient

#: the optional inputs in the order they follow x, W, R (ND4J lstmLayer's order)
OPTIONAL = ("b", "seq_len", "h0", "c0", "peephole")
FORMATS = ("TNS", "NTS", "NST", "T2NS")
DIRECTIONS = ("fwd", "bwd", "bidir_sum", "bidir_concat", "bidir_extra_dim")
#: batch x hidden below which an LSTM runs its numpy route rather than the compiled loops
#: (a tiny layer should not wait for a compile; the table's samples stay below it)
KERNEL_MIN_WORK = 64
#: the compiled loops' whole-sequence products (input projection, weight gradients, ``dx``)
#: on the private BLAS (``keep_numpy_asleep``): numpy's threaded GEMM would wake OpenBLAS's
#: pool, whose spinning takes the core of the loops' second half -- this layer's next step,
#: or another layer's (W8's loops ran 1.7-1.9x slower)
M = lazy("matmul")
#: gate order -> the permutation of its gate blocks into the cell's canonical order, and of
#: the LSTM's peepholes (canonical i, f, o)
GATE_ORDERS = {
    "lstm": {"ifco": ((0, 1, 2, 3), (0, 1, 2)), "iofc": ((0, 2, 3, 1), (0, 2, 1))},
    "gru": {"rzn": ((0, 1, 2), None), "zrn": ((1, 0, 2), None)},
    "rnn": {"h": ((0,), None)},
}
_ORDER_NAMES = {"lstm": {"nd4j": "ifco", "pytorch": "ifco", "ifgo": "ifco", "onnx": "iofc"},
                "gru": {"nd4j": "rzn", "pytorch": "rzn", "ruc": "rzn", "onnx": "zrn",
                        "zrh": "zrn"},
                "rnn": {"nd4j": "h", "pytorch": "h", "onnx": "h"}}
_DEFAULT_ACTS = {"lstm": ("sigmoid", "tanh", "tanh"), "gru": ("sigmoid", "tanh"),
                 "rnn": ("tanh",)}


def _given_kind(kind: str) -> AttrKind:
    allowed = tuple(n for n in OPTIONAL if kind == "lstm" or n not in ("c0", "peephole"))

    def coerce(v: Any) -> tuple[str, ...]:
        names = (v,) if isinstance(v, str) else tuple(str(n) for n in v)
        if any(n not in allowed for n in names) or len(set(names)) != len(names):
            raise ValueError(f"expected optional input names from {allowed}, got {v!r}")
        return tuple(n for n in allowed if n in names)  # (canonical order)
    return AttrKind("inputs", coerce)


def _order_kind(kind: str) -> AttrKind:
    def coerce(v: Any) -> str:
        s = Attr.STR.coerce(v).lower()
        s = _ORDER_NAMES[kind].get(s, s)
        if s not in GATE_ORDERS[kind]:
            raise ValueError(f"expected one of {sorted(GATE_ORDERS[kind])} (or nd4j, pytorch, "
                             f"onnx), got {v!r}")
        return s
    return AttrKind("|".join(GATE_ORDERS[kind]), coerce)


def layer_attrs(kind: str) -> dict:
    acts = activations_kind(len(_DEFAULT_ACTS[kind]), {
        "lstm": "gate, cell, output", "gru": "gate, candidate", "rnn": "hidden"}[kind])
    attrs = {"given": (_given_kind(kind), ()),
             "data_format": (choice(*FORMATS), "TNS"),
             "direction": (choice(*DIRECTIONS), "fwd"),
             "gate_order": (_order_kind(kind), next(iter(GATE_ORDERS[kind]))),
             "activations": (acts, acts.coerce(_DEFAULT_ACTS[kind]))}
    if kind == "lstm":
        attrs["cell_clip"] = (Attr.FLOAT, 0.0)
        attrs["keep_workspace"] = (Attr.BOOL, False)
    if kind == "gru":
        attrs["linear_before_reset"] = (Attr.BOOL, False)
    return attrs


# --- shapes -------------------------------------------------------------------------------------

def _named(items: list, a: Any) -> dict[str, Any]:
    """The inputs by name (``x``, ``W``, ``R`` and the ``given`` ones)."""
    names = ("x", "W", "R", *a.given)
    if len(items) != len(names):
        raise OpError(f"takes the inputs {names} (given={a.given}), got {len(items)} arrays")
    return dict(zip(names, items))


def _layer_infer(kind: str):
    cell = CELLS[kind]
    name = f"{kind}_layer"

    def infer(types: list[TensorType], a: Any) -> list[TensorType]:
        try:
            t = _named(types, a)
        except OpError as err:
            raise OpError(f"{name}: {err}") from None
        x, W, R = t["x"], t["W"], t["R"]
        bidir = a.direction.startswith("bidir")
        lead = (2,) if bidir else ()
        dirs = "bidirectional: " if bidir else ""

        def fail(what: str) -> OpError:
            return OpError(f"{name}: {what} (x {x}, W {W}, R {R}; data_format={a.data_format}"
                           f", direction={a.direction})")
        if (a.direction == "bidir_extra_dim") != (a.data_format == "T2NS") and bidir:
            raise fail("direction bidir_extra_dim goes with data_format T2NS (output [time, "
                       "2, batch, hidden]) and T2NS takes no other bidirectional mode")
        for n, tt in t.items():
            if n != "seq_len" and tt.dtype.kind != "f":
                raise fail(f"{n} must be floating point, got {tt}")
            if n != "seq_len" and tt.dtype != x.dtype:
                raise fail(f"{n} is {tt.dtype} but x is {x.dtype}; give every weight x's dtype")
        if len(x.shape) != 3:
            raise fail(f"x must be rank 3 ({a.data_format if a.data_format != 'T2NS' else 'TNS'}"
                       f"), got {x}")
        fmt = "TNS" if a.data_format == "T2NS" else a.data_format
        steps, batch, n_in = (x.shape[fmt.index(c)] for c in "TNS")
        if len(R.shape) != 2 + bidir or len(W.shape) != 2 + bidir:
            raise fail(f"{dirs}W must be {'[2, ' if bidir else '['}nIn, {cell.gates}*hidden] and "
                       f"R {'[2, ' if bidir else '['}hidden, {cell.gates}*hidden]")
        widths = [d // cell.gates for d in (R.shape[-1], W.shape[-1]) if d >= 0]
        hidden = R.shape[-2] if R.shape[-2] >= 0 else (widths[0] if widths else -1)
        gh = cell.gates * hidden if hidden >= 0 else -1
        agree = (lambda got, want: all(g < 0 or w < 0 or g == w for g, w in zip(got, want)))
        if not (agree(W.shape, (*lead, n_in, gh)) and agree(R.shape, (*lead, hidden, gh))) \
                or any(d >= 0 and d % cell.gates for d in (R.shape[-1], W.shape[-1])):
            raise fail(f"the weights do not fit: W must be {[*lead, n_in, gh]} and R "
                       f"{[*lead, hidden, gh]} for nIn={n_in}, hidden={hidden} "
                       f"({cell.gates} gate{'s' if cell.gates > 1 else ''})")
        expect = {"b": [(*lead, gh), (*lead, 2 * gh)], "seq_len": [(batch,)],
                  "h0": [(*lead, batch, hidden)], "c0": [(*lead, batch, hidden)],
                  "peephole": [(*lead, 3 * hidden)]}
        for n in a.given:
            got = t[n].shape
            if not any(len(got) == len(e) and agree(got, e) for e in expect[n]):
                raise fail(f"{n} must have shape {' or '.join(map(str, expect[n]))}, got "
                           f"{t[n]}")
        if "seq_len" in t and t["seq_len"].dtype.kind not in "iu":
            raise fail(f"seq_len must be integers (steps per example), got {t['seq_len']}")
        width = 2 * hidden if a.direction == "bidir_concat" and hidden >= 0 else hidden
        if a.data_format == "T2NS":
            y = (steps, 2 if bidir else 1, batch, hidden)
        else:
            y = tuple({"T": steps, "N": batch, "S": width}[c] for c in fmt)
        last = TensorType((*lead, batch, hidden), x.dtype)
        workspace = [TensorType((-1,), x.dtype)] if getattr(a, "keep_workspace", False) else []
        return [TensorType(y, x.dtype), last] + ([last] if cell.states == 2 else []) + workspace
    return infer


# --- the driver ---------------------------------------------------------------------------------

#: data format -> the axes that make it time-major ([time, batch, features]), and back
_TO_TIME_MAJOR = {"TNS": None, "T2NS": None, "NTS": (1, 0, 2), "NST": (2, 0, 1)}
_FROM_TIME_MAJOR = {"TNS": None, "T2NS": None, "NTS": (1, 0, 2), "NST": (1, 2, 0)}


def _time_major(x: np.ndarray, fmt: str) -> np.ndarray:
    axes = _TO_TIME_MAJOR[fmt]
    return x if axes is None else x.transpose(axes)


def _from_time_major(y: np.ndarray, fmt: str) -> np.ndarray:
    axes = _FROM_TIME_MAJOR[fmt]
    return y if axes is None else y.transpose(axes)


def _reverse_index(steps: int, lengths: np.ndarray | None, batch: int) -> tuple:
    """The index that reverses each example's first ``lengths[b]`` steps (the rest stay):
    applying it twice is the identity."""
    t = np.arange(steps)[:, None]
    if lengths is None:
        return (np.broadcast_to(steps - 1 - t, (steps, batch)), np.arange(batch)[None, :])
    src = np.where(t < lengths[None, :], lengths[None, :] - 1 - t, t)
    return src, np.arange(batch)[None, :]


def _blocks(w: np.ndarray | None, perm: tuple[int, ...], inverse: bool = False) -> Any:
    """Reorder the gate blocks of the last axis of ``w``: block k of the result is block
    ``perm[k]`` of ``w`` (``inverse``: undo that)."""
    if w is None or perm == tuple(range(len(perm))):
        return w
    if inverse:
        perm = tuple(int(i) for i in np.argsort(perm))
    parts = np.split(w, len(perm), axis=-1)
    return np.concatenate([parts[p] for p in perm], axis=-1)


class _Direction:
    """One direction of a layer in the cell's canonical gate order: its weights and what its
    backward pass needs."""

    def __init__(self, kind: str, a: Any, n: dict, d: int | None, reverse: bool) -> None:
        self.cell = CELLS[kind]
        self.kind, self.reverse = kind, reverse
        perm, peep_perm = GATE_ORDERS[kind][a.gate_order]
        self.perm, self.peep_perm = perm, peep_perm
        pick = (lambda v: None if v is None else (v if d is None else v[d]))
        self.W = _blocks(pick(n["W"]), perm)
        R = _blocks(pick(n["R"]), perm)
        gh = R.shape[-1]
        b = pick(n.get("b"))
        self.split_bias = b is not None and b.shape[-1] == 2 * gh
        lbr = kind == "gru" and a.linear_before_reset
        rec_bias = None
        if b is None:
            b_in = None
        elif self.split_bias:
            b_in, b_rec = _blocks(b[:gh], perm), _blocks(b[gh:], perm)
            if lbr:
                rec_bias = b_rec
            else:
                b_in = b_in + b_rec
        else:
            b_in = _blocks(b, perm)
        self.b_in = b_in
        peep = pick(n.get("peephole"))
        if peep is not None:
            peep = peep.reshape(3, -1)[list(peep_perm)]
        self.w = StepWeights(R, peep, rec_bias, a.activations,
                             getattr(a, "cell_clip", 0.0), lbr)
        self.h0, self.c0 = pick(n.get("h0")), pick(n.get("c0"))

    def initial(self, batch: int, dtype: np.dtype) -> tuple:
        hidden = self.w.R.shape[0]
        zero = np.zeros((batch, hidden), dtype)
        h = zero if self.h0 is None else np.asarray(self.h0, dtype)
        if self.cell.states == 1:
            return (h,)
        return h, zero if self.c0 is None else np.asarray(self.c0, dtype)

    def project(self, xt: np.ndarray, order: tuple | None, gate_major: bool = False) -> np.ndarray:
        """``x @ W + b`` for every step at once, in this direction's time order: ``[T, B,
        gates * H]``, or with ``gate_major`` ``[gates, T, B, H]`` (what the compiled loops
        read: one GEMM per gate writes it in place, no transposed copy)."""
        steps, batch, n_in = xt.shape
        flat = xt.reshape(steps * batch, n_in)
        if gate_major:
            gates = self.cell.gates
            w = self.W.reshape(n_in, gates, -1).transpose(1, 0, 2)
            zx = M.matmul(flat, w).reshape(gates, steps, batch, -1)  # (never numpy's pool)
            if self.b_in is not None:
                zx += self.b_in.reshape(gates, 1, 1, -1)
            return zx[:, order[0], order[1]] if order is not None else zx
        zx = M.matmul(flat, self.W).reshape(steps, batch, -1)
        if self.b_in is not None:
            zx += self.b_in
        return zx[order] if order is not None else zx

    def compiled(self, dtype: np.dtype, batch: int, steps: int) -> bool:
        """Run the compiled time loops (``kernels/recurrent.py``: float32 LSTMs with the default
        activations)? Layers smaller
        than ``KERNEL_MIN_WORK`` take the numpy route: they never wait for a compile."""
        if self.kind != "lstm" or batch * self.w.R.shape[0] < KERNEL_MIN_WORK:
            return False
        from ..kernels import recurrent as kernels  # (imports Numba: only when one runs)
        return kernels.ready(dtype, tuple(a[0] for a in self.w.acts), steps, batch,
                             self.w.R.shape[0])

    def run(self, zx: np.ndarray, lengths: np.ndarray | None, keep: bool,
            workspace: np.ndarray | None = None) -> tuple:
        """Every step: ``(ys [T, B, H], last state, tape)`` (the tape, with ``keep``, is what
        ``back`` reads; the compiled loops write it into ``workspace`` when given)."""
        if zx.ndim == 4:  # gate-major: the input of the compiled loops (``compiled``)
            return self._run_compiled(zx, lengths, keep, workspace)
        steps, batch = zx.shape[:2]
        state = self.initial(batch, zx.dtype)
        ys = np.zeros((steps, batch, self.w.R.shape[0]), zx.dtype)
        step = self.cell.step
        tape: list | None = [] if keep else None
        for t in range(steps):
            new, saved = step(zx[t], state, self.w)
            if lengths is not None:
                live = (t < lengths)[:, None]
                new = tuple(np.where(live, s_new, s) for s_new, s in zip(new, state))
                ys[t] = np.where(live, new[0], 0.0)
            else:
                ys[t] = new[0]
            if tape is not None:
                tape.append((state, saved))
            state = new
        return ys, state, tape

    def back(self, dys: np.ndarray, d_last: tuple, lengths: np.ndarray | None,
             tape: Any) -> tuple[np.ndarray, tuple, Grads]:
        """``(dzx [T, B, gates * H], gradient of the initial state, weight gradients)``."""
        if isinstance(tape, _KernelTape):
            return self._back_compiled(dys, d_last, lengths, tape)
        acc = Grads(self.w)
        dzx = np.empty((dys.shape[0], dys.shape[1], self.w.R.shape[1]), dys.dtype)
        d = d_last
        for t in range(len(tape) - 1, -1, -1):
            state, saved = tape[t]
            d_new = (dys[t] + d[0], *d[1:])
            if lengths is not None:
                live = (t < lengths)[:, None]
                d_new = tuple(np.where(live, g, 0.0) for g in d_new)
            dz, d_prev = self.cell.step_back(d_new, state, saved, self.w, acc)
            if lengths is not None:  # a finished example's state went through unchanged
                d_prev = tuple(p + np.where(live, 0.0, g) for p, g in zip(d_prev, d))
            dzx[t] = dz
            d = d_prev
        return dzx, d, acc

    # -- the compiled loops (LSTM) --------------------------------------------------------------
    def _kernel_args(self, batch: int) -> tuple:
        """R, the peepholes repeated per example ``[3, batch * H]`` (zeros: none), the clip
        (inf: none), as the compiled loops take them."""
        w = self.w
        hidden = w.R.shape[0]
        peep = (np.zeros((3, batch * hidden), np.float32) if w.peephole is None
                else np.tile(np.asarray(w.peephole, np.float32), (1, batch)))
        return (np.ascontiguousarray(w.R, np.float32), peep,
                float(w.clip) if w.clip > 0 else np.inf)

    @staticmethod
    def _lengths(lengths: np.ndarray | None) -> np.ndarray:
        return np.zeros(0, np.int64) if lengths is None else np.ascontiguousarray(lengths,
                                                                                 np.int64)

    def _run_compiled(self, zx: np.ndarray, lengths: np.ndarray | None, keep: bool,
                      workspace: np.ndarray | None) -> tuple:
        from ..kernels.recurrent import forward
        gates, steps, batch, hidden = zx.shape
        dt = zx.dtype
        if workspace is not None:
            tape = _carve(workspace, steps, batch, hidden)
        else:
            rows = steps if keep else 1
            tape = _KernelTape(np.empty((steps + 1, batch, hidden), dt),
                               np.empty((steps + 1, batch, hidden), dt),
                               np.empty((rows, gates, batch, hidden), dt),
                               np.empty((rows, batch, hidden), dt),
                               np.empty((rows, batch, hidden), dt))
        tape.hs[0], tape.cs[0] = self.initial(batch, dt)
        ys = np.empty((steps, batch, hidden), dt)
        R, peep, clip = self._kernel_args(batch)
        forward(np.ascontiguousarray(zx), R, peep, self._lengths(lengths), clip, tape.hs,
                tape.cs, ys, np.empty((gates, batch, hidden), dt), tape.post, tape.raw,
                tape.oc, keep or workspace is not None)
        return ys, (tape.hs[steps], tape.cs[steps]), (tape if keep else None)

    def _back_compiled(self, dys: np.ndarray, d_last: tuple, lengths: np.ndarray | None,
                       tape: "_KernelTape") -> tuple[np.ndarray, tuple, Grads]:
        from ..kernels.recurrent import backward
        steps, batch, hidden = dys.shape
        dt = dys.dtype
        R, peep, clip = self._kernel_args(batch)
        dh, dc = (np.array(g, dt, copy=True, order="C") for g in d_last)
        dz = np.empty((4, steps, batch, hidden), dt)
        dpeep = np.zeros_like(peep)
        backward(np.ascontiguousarray(dys), dh, dc, R, peep, self._lengths(lengths), clip,
                 tape.hs, tape.cs, tape.post, tape.raw, tape.oc, dz, dpeep,
                 np.empty((batch, hidden), dt), np.empty((2, batch, hidden), dt))
        dzx = dz.transpose(1, 2, 0, 3).reshape(steps, batch, 4 * hidden)
        acc = Grads(self.w)
        acc.R = M.matmul(tape.hs[:steps].reshape(steps * batch, hidden).T,
                         dzx.reshape(steps * batch, -1),
                         keep_numpy_asleep=True)
        if acc.peephole is not None:
            acc.peephole = dpeep.reshape(3, batch, hidden).sum(1)
        return dzx, (dh, dc), acc


class _KernelTape(NamedTuple):
    """What the compiled backward loop reads (``kernels/recurrent.py``)."""

    hs: np.ndarray
    cs: np.ndarray
    post: np.ndarray
    raw: np.ndarray
    oc: np.ndarray


def _tape_size(steps: int, batch: int, hidden: int) -> int:
    """The values of one direction's ``_KernelTape``: states ``[T + 1, B, H]`` twice, the
    gates ``[T, 4, B, H]``, the raw cell and its tanh ``[T, B, H]``."""
    return (2 * (steps + 1) + 6 * steps) * batch * hidden


def _carve(buffer: np.ndarray, steps: int, batch: int, hidden: int) -> _KernelTape:
    """A ``_KernelTape`` of views into ``buffer`` (one direction's part of a workspace)."""
    shapes = ((steps + 1, batch, hidden), (steps + 1, batch, hidden),
              (steps, 4, batch, hidden), (steps, batch, hidden), (steps, batch, hidden))
    parts, start = [], 0
    for shape in shapes:
        size = int(np.prod(shape))
        parts.append(buffer[start:start + size].reshape(shape))
        start += size
    return _KernelTape(*parts)


def _directions(kind: str, a: Any, n: dict) -> list[_Direction]:
    if a.direction in ("fwd", "bwd"):
        return [_Direction(kind, a, n, None, a.direction == "bwd")]
    return [_Direction(kind, a, n, 0, False), _Direction(kind, a, n, 1, True)]


def _prepare(kind: str, arrays: tuple, a: Any) -> tuple:
    n = _named([np.asarray(v) for v in arrays], a)
    _layer_infer(kind)([TensorType(v.shape, v.dtype) for v in n.values()], a)  # eager checks
    xt = _time_major(n["x"], a.data_format)
    lengths = n.get("seq_len")
    if lengths is not None:
        lengths = lengths.astype(np.int64)
        if lengths.size and (lengths.min() < 0 or lengths.max() > xt.shape[0]):
            raise OpError(f"{kind}_layer: seq_len must be in [0, {xt.shape[0]}] (the number "
                          f"of time steps); got values from {lengths.min()} to {lengths.max()}")
    return n, xt, lengths


@forksafe.guarded  # BLAS GEMMs and the compiled loops: a fork waits for them
def _forward(kind: str, arrays: tuple, a: Any) -> tuple:
    """The op: the layer's outputs."""
    return _run_layer(kind, _prepare(kind, arrays, a), a, None)


def _run_layer(kind: str, prepared: tuple, a: Any, tapes: list | None) -> tuple:
    """The layer's outputs from ``_prepare``'s inputs; ``tapes`` collects ``(direction, time
    order, tape)`` per direction for ``_backward``. With ``keep_workspace`` (an LSTM
    differentiated by autodiff) the tapes of the compiled loops are written into one array,
    returned last, which the gradient op reads instead of running the layer again (empty when
    the numpy route ran)."""
    n, xt, lengths = prepared
    steps, batch = xt.shape[:2]
    directions = _directions(kind, a, n)
    compiled = directions[0].compiled(xt.dtype, batch, steps)  # (the same for both)
    hidden = directions[0].w.R.shape[0]
    keep_workspace = getattr(a, "keep_workspace", False)
    per_direction = _tape_size(steps, batch, hidden)
    workspace = (np.empty(len(directions) * per_direction, xt.dtype) if keep_workspace
                 and compiled else np.empty(0, xt.dtype))
    ys, lasts = [], []
    for k, direction in enumerate(directions):
        order = _reverse_index(steps, lengths, batch) if direction.reverse else None
        part = workspace[k * per_direction:(k + 1) * per_direction] if workspace.size else None
        y, last, tape = direction.run(direction.project(xt, order, compiled), lengths,
                                      tapes is not None, part)
        ys.append(y[order] if order is not None else y)
        lasts.append(last)
        if tapes is not None:
            tapes.append((direction, order, tape))
    if len(ys) == 1:
        y = ys[0][:, None] if a.data_format == "T2NS" else ys[0]
        states = lasts[0]
    else:
        y = {"bidir_sum": lambda: ys[0] + ys[1],
             "bidir_concat": lambda: np.concatenate(ys, axis=-1),
             "bidir_extra_dim": lambda: np.stack(ys, axis=1)}[a.direction]()
        states = tuple(np.stack(pair) for pair in zip(*lasts))
    return (_from_time_major(y, a.data_format), *states,
            *((workspace,) if keep_workspace else ()))


def _tapes_from(kind: str, prepared: tuple, a: Any, workspace: np.ndarray | None) -> list:
    """Each direction's tape: read from the forward's workspace when it has one, else from
    running the layer again."""
    tapes: list = []
    if workspace is None or not workspace.size:
        _run_layer(kind, prepared, a, tapes)
        return tapes
    n, xt, lengths = prepared
    steps, batch = xt.shape[:2]
    for k, direction in enumerate(_directions(kind, a, n)):
        size = _tape_size(steps, batch, direction.w.R.shape[0])
        order = _reverse_index(steps, lengths, batch) if direction.reverse else None
        tapes.append((direction, order, _carve(workspace[k * size:(k + 1) * size], steps,
                                               batch, direction.w.R.shape[0])))
    return tapes


@forksafe.guarded
def _backward(kind: str, arrays: tuple, grads: tuple, a: Any,
              workspace: np.ndarray | None = None) -> tuple:
    prepared = _prepare(kind, arrays, a)
    tapes = _tapes_from(kind, prepared, a, workspace)
    _, xt, lengths = prepared
    steps, batch, n_in = xt.shape
    x2d = xt.reshape(steps * batch, n_in)  # (a copy for NTS/NST: made once, not per direction)
    dy = np.asarray(grads[0], xt.dtype)
    dy_t = _time_major(dy, a.data_format)
    bidir = len(tapes) == 2
    hidden = tapes[0][0].w.R.shape[0]
    out: dict[str, list] = {k: [] for k in ("x", "W", "R", "b", "h0", "c0", "peephole")}
    dx = np.zeros_like(xt)
    for k, (direction, order, tape) in enumerate(tapes):
        if a.data_format == "T2NS":
            dyk = dy_t[:, k]
        elif a.direction == "bidir_concat":
            dyk = dy_t[..., k * hidden:(k + 1) * hidden]
        else:
            dyk = dy_t
        d_last = tuple(np.asarray(g[k] if bidir else g, xt.dtype) for g in grads[1:])
        if order is not None:
            dyk = dyk[order]
        dzx, d0, acc = direction.back(dyk, d_last, lengths, tape)
        if order is not None:
            dzx = dzx[order]
        flat = dzx.reshape(steps * batch, -1)
        asleep = isinstance(tape, _KernelTape)  # (the compiled loops: see ``M``)
        if getattr(a, "input_grad", True):
            dx += M.matmul(flat, direction.W.T,
                           keep_numpy_asleep=asleep).reshape(steps, batch, n_in)
        perm, peep_perm = direction.perm, direction.peep_perm
        out["W"].append(_blocks(M.matmul(x2d.T, flat, keep_numpy_asleep=asleep), perm, True))
        out["R"].append(_blocks(acc.R, perm, True))
        db = _blocks(flat.sum(0), perm, True)
        if direction.split_bias:
            rec = (_blocks(acc.recurrent_bias, perm, True) if direction.w.recurrent_bias
                   is not None else db)
            db = np.concatenate([db, rec])
        out["b"].append(db)
        out["h0"].append(d0[0])
        if len(d0) > 1:
            out["c0"].append(d0[1])
        if acc.peephole is not None:
            out["peephole"].append(acc.peephole[list(np.argsort(peep_perm))].reshape(-1))
    out["x"] = [_from_time_major(dx, a.data_format)]
    pack = (lambda vs: np.stack(vs) if bidir else vs[0])
    return tuple(pack(out[name]) if name != "x" else out["x"][0]
                 for name in ("x", "W", "R", *a.given) if name != "seq_len")


# --- the ops ------------------------------------------------------------------------------------

def _no_second_order(ins: list, outs: list, gs: list, a: Any) -> list:
    raise GradientError("the gradient of a recurrent layer (lstm_layer, gru_layer, "
                        "rnn_layer) runs back through time in one op and is not "
                        "differentiable again")


def _grad_rule(kind: str):
    outputs = CELLS[kind].states + 1

    def rule(ins: list, outs: list, gs: list, a: Any) -> list:
        workspace = [outs[outputs]] if getattr(a, "keep_workspace", False) else []
        got = getattr(op, f"{kind}_layer_grad")(*ins, *workspace, *gs[:outputs],
                                                 input_grad=needs_gradient(ins[0].name),
                                                 **dict(vars(a)))
        got = list(got) if isinstance(got, (list, tuple)) else [got]
        names = ("x", "W", "R", *a.given)
        return [None if name == "seq_len" else got.pop(0) for name in names]
    return rule


def _grad_infer(kind: str):
    forward = _layer_infer(kind)

    def infer(types: list[TensorType], a: Any) -> list[TensorType]:
        count = 3 + len(a.given)
        forward(types[:count], SimpleNamespace(**{**vars(a), "keep_workspace": False}))
        return [t for name, t in zip(("x", "W", "R", *a.given), types[:count])
                if name != "seq_len"]
    return infer


def _layer_warm(kind: str, loop: str):
    """``OpDef.warm`` of a layer (``loop`` "forward") or of its gradient ("backward", whose
    first inputs are the layer's): the warm-up of the compiled LSTM loop it runs when
    ``Layer.compiled`` takes the loops at these static types (float32, the default
    activations, enough work per step)."""
    def warm(types: Any, attrs: Any) -> tuple:
        x, R = types[0], types[2]
        if kind != "lstm" or x.dtype != np.float32 or len(x.shape) != 3 or len(R.shape) < 2 \
                or attrs.activations != layer_attrs(kind)["activations"][1]:
            return ()
        steps, batch = (x.shape[axis] for axis in
                        (_TO_TIME_MAJOR[attrs.data_format] or (0, 1, 2))[:2])
        hidden = R.shape[-2]
        if batch < 0 or hidden < 0 or batch * hidden < KERNEL_MIN_WORK:
            return ()
        warm = [("samediff.kernels.recurrent", f"_warm_{loop}", ("lstm", "float32"))]
        from ..kernels.recurrent import by_units  # (imports Numba: plans are being built)
        if loop == "forward" and steps >= 0 and by_units(steps, batch, hidden):
            warm.append(("samediff.kernels.recurrent", "_warm_units", ("lstm_units", "float32")))
        return tuple(warm)
    return warm


def _grad_impl(kind: str):
    def impl(*xs: Any, **attrs: Any) -> tuple:
        a = SimpleNamespace(**attrs)
        count = 3 + len(a.given)
        keep = getattr(a, "keep_workspace", False)
        workspace = np.asarray(xs[count]) if keep else None
        return _backward(kind, xs[:count], xs[count + keep:], a, workspace)
    return impl


for _kind, _title in (("lstm", "LSTM"), ("gru", "GRU"), ("rnn", "simple RNN (ONNX RNN)")):
    define(f"{_kind}_layer", ["*inputs"], _layer_infer(_kind),
           (lambda k: lambda *xs, **a: _forward(k, xs, SimpleNamespace(**a)))(_kind),
           attrs=layer_attrs(_kind), namespace="rnn", method=False, multi_output=True,
           grad=_grad_rule(_kind), warm=_layer_warm(_kind, "forward"),
           workspace="keep_workspace" if _kind == "lstm" else None,
           doc=f"A {_title} layer over a sequence: inputs x, W, R and the optional ones named "
               f"by ``given`` (b, seq_len, h0" + (", c0, peephole" if _kind == "lstm" else "")
               + "); data_format TNS/NTS/NST/T2NS, direction fwd/bwd/bidir_*; returns y, "
               "h_last" + (", c_last (and, with keep_workspace, the tape its gradient reads)"
                           if _kind == "lstm" else "") + ".")
    define(f"{_kind}_layer_grad", ["*inputs"], _grad_infer(_kind), _grad_impl(_kind),
           attrs={**layer_attrs(_kind), "input_grad": (Attr.BOOL, True)}, namespace="rnn", method=False, multi_output=True,
           grad=_no_second_order, warm=_layer_warm(_kind, "backward"),
           doc=f"The gradient of {_kind}_layer (inputs: its inputs, "
               + ("its workspace when keep_workspace, " if _kind == "lstm" else "")
               + "then the gradients of its outputs): the gradients of its float inputs, "
                 "back through time (x's zeros when input_grad is false: autodiff says so when "
                 "x needs none, a placeholder in training).")
