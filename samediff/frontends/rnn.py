"""The recurrent-layer forms of ``sd.rnn`` and ``nd.rnn``: keyword forms of the layer ops and
ND4J's calls with its weight and config objects.

The ops (``samediff/ops/recurrent.py``) take ``x, W, R`` and the optional inputs their
``given`` attribute names. Here:

* ``lstm_layer(x, W, R, b=None, seq_len=None, h0=None, c0=None, peephole=None, **attrs)``,
  ``gru_layer(...)`` and ``rnn_layer(...)`` pass the optional inputs by keyword and return
  every output (``y, h_last[, c_last]``);
* ND4J's ``lstmLayer(x, cLast, yLast, maxTSLength, LSTMLayerWeights, LSTMLayerConfig)`` (and
  ``lstmLayer(x, weights, config)``) return the outputs the config asks for
  (``retFullSequence``, ``retLastH``, ``retLastC``), in that order, as a tuple;
* ND4J's ``gru(x, hLast, Wx, Wh, b)`` returns every step's output;
* ND4J's cells ``lstmCell(x, cLast, yLast, LSTMWeights, LSTMConfiguration)`` (outputs ``i, c,
  f, o, z, h, y`` as ND4J's LSTMBlockCell: gates, cell state, block input, ``tanh(c)``, output)
  and ``gruCell(x, hLast, GRUWeights)`` (``r, u, c, h``) are written with table ops, so they
  trace, fuse and differentiate to any order.

>>> import numpy as np, nd4py as nd
>>> rng = np.random.default_rng(0)
>>> x = rng.normal(size=(5, 2, 3))                      # [time, batch, nIn] (TNS)
>>> w = LSTMLayerWeights(weights=rng.normal(size=(3, 16)), rWeights=rng.normal(size=(4, 16)))
>>> cfg = LSTMLayerConfig(retFullSequence=True, retLastH=True)
>>> y, h = nd.rnn.lstmLayer(x, w, cfg)
>>> y.shape, h.shape, bool(np.allclose(y.numpy()[-1], h.numpy()))
((5, 2, 4), (2, 4), True)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..errors import OpError
from ..ops.recurrent import OPTIONAL
from .cnn_config import _Builder


class _Configured:
    @classmethod
    def builder(cls) -> _Builder:
        """ND4J's builder: ``LSTMLayerConfig.builder().directionMode("BIDIR_CONCAT").build()``."""
        return _Builder(cls)


@dataclass(frozen=True)
class LSTMLayerConfig(_Configured):
    """ND4J's ``LSTMLayerConfig``: layout (``TNS``, ``NTS``, ``NST``, ``T2NS``), direction
    (``FWD``, ``BWD``, ``BIDIR_SUM``, ``BIDIR_CONCAT``, ``BIDIR_EXTRA_DIM``), activations with
    their alpha/beta, the outputs to return, the cell clip; ``gateOrder`` (nd4py's) reads
    PyTorch's or ONNX's weights as they are (``"pytorch"``: the same ``i, f, g, o`` as ND4J;
    ``"onnx"``: ``i, o, f, c``)."""

    lstmdataformat: str = "TNS"
    directionMode: str = "FWD"
    gateAct: str = "SIGMOID"
    cellAct: str = "TANH"
    outAct: str = "TANH"
    gateAlpha: float | None = None
    gateBeta: float | None = None
    cellAlpha: float | None = None
    cellBeta: float | None = None
    outAlpha: float | None = None
    outBeta: float | None = None
    retFullSequence: bool = True
    retLastH: bool = False
    retLastC: bool = False
    cellClip: float = 0.0
    gateOrder: str = "nd4j"

    def op_attrs(self) -> dict:
        acts = []
        for act, alpha, beta in ((self.gateAct, self.gateAlpha, self.gateBeta),
                                 (self.cellAct, self.cellAlpha, self.cellBeta),
                                 (self.outAct, self.outAlpha, self.outBeta)):
            params = [p for p in (alpha, beta) if p is not None]
            if beta is not None and alpha is None:
                raise OpError(f"LSTMLayerConfig: {act} has a beta but no alpha; give both")
            acts.append((act, *params))
        return {"data_format": self.lstmdataformat, "direction": self.directionMode,
                "activations": tuple(acts), "cell_clip": float(self.cellClip),
                "gate_order": self.gateOrder}

    def wanted(self) -> tuple[bool, bool, bool]:
        if not (self.retFullSequence or self.retLastH or self.retLastC):
            raise OpError("LSTMLayerConfig: retFullSequence, retLastH and retLastC are all "
                          "False: the layer would return nothing; set at least one")
        return self.retFullSequence, self.retLastH, self.retLastC


@dataclass(frozen=True)
class LSTMLayerWeights(_Configured):
    """ND4J's ``LSTMLayerWeights``: ``weights [nIn, 4 nOut]``, ``rWeights [nOut, 4 nOut]``,
    optional ``peepholeWeights [3 nOut]`` and ``bias [4 nOut]`` (each with a leading 2 for
    a bidirectional layer)."""

    weights: Any
    rWeights: Any
    peepholeWeights: Any = None
    bias: Any = None


@dataclass(frozen=True)
class LSTMConfiguration(_Configured):
    """ND4J's ``LSTMConfiguration`` of ``lstmCell``: peepholes on or off, a bias added to the
    forget gate, and the cell clip (0: none)."""

    peepHole: bool = False
    forgetBias: float = 0.0
    clippingCellValue: float = 0.0


@dataclass(frozen=True)
class LSTMWeights(_Configured):
    """ND4J's ``LSTMWeights`` of ``lstmCell``: ``ruWeight [nIn + nOut, 4 nOut]`` (gates ``i, z,
    f, o`` as ND4J's LSTMBlockCell), peepholes ``[nOut]`` each, ``bias [4 nOut]``."""

    ruWeight: Any
    inputPeepholeWeights: Any = None
    forgetPeepholeWeights: Any = None
    outputPeepholeWeights: Any = None
    bias: Any = None


@dataclass(frozen=True)
class GRUWeights(_Configured):
    """ND4J's ``GRUWeights`` of ``gruCell``: ``ruWeight [nIn + nOut, 2 nOut]`` (reset, update),
    ``cWeight [nIn + nOut, nOut]``, ``ruBias [2 nOut]``, ``cBias [nOut]``."""

    ruWeight: Any
    cWeight: Any
    ruBias: Any = None
    cBias: Any = None


def _split_name(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """ND4J's leading output name(s) (``sd.rnn.lstmLayer("lstm", x, ...)``) into ``name=``."""
    if args and isinstance(args[0], (str, list)) and (
            isinstance(args[0], str) or all(isinstance(n, str) for n in args[0])):
        first = args[0] if isinstance(args[0], str) else args[0][0]
        return args[1:], {**kwargs, "name": first}
    return args, kwargs


def _one_of(args: tuple, kwargs: dict, cls: type, key: str, call: str) -> Any:
    found = [a for a in args if isinstance(a, cls)] + ([kwargs.pop(key)] if key in kwargs else [])
    if len(found) != 1:
        raise OpError(f"{call}: expected one {cls.__name__} (positionally or {key}=), got "
                      f"{len(found)}")
    return found[0]


class RnnForms:
    """The recurrent forms, mixed into the ``rnn`` namespace of SameDiff and of the eager API
    (``self._raw_op(name)`` applies a table op there: records it or runs it)."""

    _raw_op: Callable[[str], Callable[..., Any]]

    # -- keyword forms of the layer ops --------------------------------------------------------
    def _layer(self, kind: str, x: Any, W: Any, R: Any, optional: dict, attrs: dict) -> Any:
        if "given" in attrs:
            raise OpError(f"{kind}_layer: give the optional inputs by keyword ("
                          f"{', '.join(k + '=' for k in optional)}); `given` follows from them")
        given = tuple(k for k in OPTIONAL if optional.get(k) is not None)
        return self._raw_op(f"{kind}_layer")(
            [x, W, R, *(optional[k] for k in given)], given=given, **attrs)

    def lstm_layer(self, x: Any, W: Any, R: Any, b: Any = None, seq_len: Any = None,
                   h0: Any = None, c0: Any = None, peephole: Any = None, **attrs: Any) -> Any:
        """An LSTM over a sequence: ``(y, h_last, c_last)`` (see ``samediff/ops/recurrent.py``
        for the layouts, directions, gate orders and activations)."""
        return self._layer("lstm", x, W, R, {"b": b, "seq_len": seq_len, "h0": h0, "c0": c0,
                                             "peephole": peephole}, attrs)

    def gru_layer(self, x: Any, W: Any, R: Any, b: Any = None, seq_len: Any = None,
                  h0: Any = None, **attrs: Any) -> Any:
        """A GRU over a sequence: ``(y, h_last)``."""
        return self._layer("gru", x, W, R, {"b": b, "seq_len": seq_len, "h0": h0}, attrs)

    def rnn_layer(self, x: Any, W: Any, R: Any, b: Any = None, seq_len: Any = None,
                  h0: Any = None, **attrs: Any) -> Any:
        """A simple RNN (``h' = tanh(x W + h R + b)`` by default) over a sequence:
        ``(y, h_last)``."""
        return self._layer("rnn", x, W, R, {"b": b, "seq_len": seq_len, "h0": h0}, attrs)

    # -- ND4J's calls ----------------------------------------------------------------------------
    def lstmLayer(self, *args: Any, **kwargs: Any) -> tuple:
        """ND4J's ``lstmLayer([names,] x, cLast, yLast, maxTSLength, LSTMLayerWeights,
        LSTMLayerConfig)`` or ``lstmLayer(x, weights, config)``: the outputs the config asks
        for, as a tuple."""
        args, kwargs = _split_name(args, kwargs)
        weights = _one_of(args, kwargs, LSTMLayerWeights, "weights", "lstmLayer")
        config = _one_of(args, kwargs, LSTMLayerConfig, "config", "lstmLayer")
        arrays = [a for a in args if not isinstance(a, (LSTMLayerWeights, LSTMLayerConfig))]
        if len(arrays) not in (1, 4):
            raise OpError(f"lstmLayer: expected lstmLayer(x, weights, config) or lstmLayer(x, "
                          f"cLast, yLast, maxTSLength, weights, config), got {len(arrays)} "
                          f"arrays")
        x, c_last, y_last, lengths = (*arrays, None, None, None)[:4]
        outs = self.lstm_layer(x, weights.weights, weights.rWeights, weights.bias, lengths,
                               y_last, c_last, weights.peepholeWeights,
                               **config.op_attrs(), **kwargs)
        return tuple(o for o, want in zip(outs, config.wanted()) if want)

    def gru(self, *args: Any, **kwargs: Any) -> Any:
        """ND4J's ``gru([name,] x [T, bS, nIn], hLast [bS, nOut], Wx [nIn, 3 nOut], Wh [nOut,
        3 nOut], b [3 nOut])``: every step's output ``[T, bS, nOut]`` (gates reset, update,
        cell)."""
        args, kwargs = _split_name(args, kwargs)
        if len(args) != 5:
            raise OpError(f"gru: expected gru(x, hLast, Wx, Wh, b), got {len(args)} arguments")
        x, h_last, wx, wh, b = args
        return self.gru_layer(x, wx, wh, b, None, h_last, **kwargs)[0]

    def gruCell(self, *args: Any, **kwargs: Any) -> tuple:
        """ND4J's ``gruCell(x [bS, nIn], hLast [bS, nOut], GRUWeights)``: ``(r, u, c, h)`` with
        ``r, u = sigmoid([x, hLast] ruWeight + ruBias)``, ``c = tanh([x, r * hLast] cWeight +
        cBias)``, ``h = u * hLast + (1 - u) * c``."""
        args, kwargs = _split_name(args, kwargs)
        kwargs.pop("name", None)
        w = _one_of(args, kwargs, GRUWeights, "weights", "gruCell")
        x, h = [a for a in args if not isinstance(a, GRUWeights)]
        op = self._raw_op
        ru = op("matmul")(op("concat")([x, h], axis=1), w.ruWeight)
        if w.ruBias is not None:
            ru = op("add")(ru, w.ruBias)
        r, u = op("split")(op("sigmoid")(ru), 2, axis=1)
        c = op("matmul")(op("concat")([x, op("mul")(r, h)], axis=1), w.cWeight)
        if w.cBias is not None:
            c = op("add")(c, w.cBias)
        c = op("tanh")(c)
        h_new = op("add")(op("mul")(u, h), op("mul")(op("rsub")(u, 1.0), c))
        return r, u, c, h_new

    def lstmCell(self, *args: Any, **kwargs: Any) -> tuple:
        """ND4J's ``lstmCell(x [bS, nIn], cLast [bS, nOut], yLast [bS, nOut], LSTMWeights,
        LSTMConfiguration)``: ``(i, c, f, o, z, h, y)`` — ND4J's LSTMBlockCell, gates ``i, z,
        f, o`` in ``ruWeight``: ``i = sigmoid(zi + wci * cLast)``, ``f = sigmoid(zf +
        forgetBias + wcf * cLast)``, ``z = tanh(zz)``, ``c = clip(f * cLast + i * z)``, ``o =
        sigmoid(zo + wco * c)``, ``h = tanh(c)``, ``y = o * h``."""
        args, kwargs = _split_name(args, kwargs)
        kwargs.pop("name", None)
        w = _one_of(args, kwargs, LSTMWeights, "weights", "lstmCell")
        cfg = ([a for a in args if isinstance(a, LSTMConfiguration)]
               or [kwargs.pop("config", LSTMConfiguration())])[0]
        x, c_last, y_last = [a for a in args if not isinstance(a, (LSTMWeights,
                                                                   LSTMConfiguration))]
        op = self._raw_op
        pre = op("matmul")(op("concat")([x, y_last], axis=1), w.ruWeight)
        if w.bias is not None:
            pre = op("add")(pre, w.bias)
        zi, zz, zf, zo = op("split")(pre, 4, axis=1)
        if cfg.peepHole:
            zi = op("add")(zi, op("mul")(w.inputPeepholeWeights, c_last))
            zf = op("add")(zf, op("mul")(w.forgetPeepholeWeights, c_last))
        if cfg.forgetBias:
            zf = op("add")(zf, float(cfg.forgetBias))
        i, f, z = op("sigmoid")(zi), op("sigmoid")(zf), op("tanh")(zz)
        c = op("add")(op("mul")(f, c_last), op("mul")(i, z))
        if cfg.clippingCellValue > 0:
            clip = float(cfg.clippingCellValue)
            c = op("clip_by_value")(c, -clip, clip)
        if cfg.peepHole:
            zo = op("add")(zo, op("mul")(w.outputPeepholeWeights, c))
        o = op("sigmoid")(zo)
        h = op("tanh")(c)
        return i, c, f, o, z, h, op("mul")(o, h)
