"""Local response normalization (the ``cnn`` group), ND4J's ``localResponseNormalization``.

``local_response_normalization(x)``: ``x / (bias + alpha * sum(x**2 over channels c -
depth .. c + depth)) ** beta`` (TensorFlow's/libnd4j's ``depth`` is the half-width; no
division of alpha by the window size, unlike PyTorch), channels on axis 1 (NCHW, ND4J's
default) or last (NHWC). Its gradient uses ``lrn_window_sum`` (linear and symmetric, so
its own adjoint). Float inputs only.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import OpError
from .call import op
from .cnn import _attrs, _cf, float_dtype
from .cnn_attrs import choice, window
from .registry import Attr, TensorType, define

_GROUP = {"namespace": "cnn", "method": False}

LRN = {"alpha": (Attr.FLOAT, 1.0), "beta": (Attr.FLOAT, 0.5), "bias": (Attr.FLOAT, 1.0),
       "depth": (window(1, 0), 5),
       "data_format": (choice("NCHW", "NHWC"), "NCHW")}
WINDOW_SUM = {k: LRN[k] for k in ("depth", "data_format")}


def _lrn_infer(name: str):
    def infer(types: list[TensorType], a: Any) -> TensorType:
        x = types[0]
        dtype = float_dtype(name, types[:1], ("x",))
        if x.rank < 2:
            raise OpError(f"{name}: x must have a batch and a channel axis ({a.data_format}), "
                          f"got shape {x.shape}")
        return TensorType(x.shape, dtype)
    return infer


def _window_sum(x, *, depth, data_format):
    x = np.asarray(x)
    if x.dtype.kind != "f" or x.ndim < 2:
        raise TypeError("unsupported input (see the op's inference)")
    ax = 1 if _cf(data_format) else x.ndim - 1
    pad = [(0, 0)] * x.ndim
    pad[ax] = (depth, depth)
    win = np.lib.stride_tricks.sliding_window_view(np.pad(x, pad), 2 * depth + 1, axis=ax)
    return win.sum(axis=-1)


def _lrn(x, *, alpha, beta, bias, depth, data_format):
    x = np.asarray(x)
    d = bias + alpha * _window_sum(x * x, depth=depth, data_format=data_format)
    return x * d ** -beta


def _lrn_grad(ins, outs, gs, a):
    x, g = ins[0], gs[0]
    kw = {"depth": a.depth, "data_format": a.data_format}
    d = op.lrn_window_sum(x * x, **kw) * a.alpha + a.bias
    p = d ** -a.beta
    back = op.lrn_window_sum(g * x * p / d, **kw)
    return [g * p - x * back * (2.0 * a.alpha * a.beta)]


define("lrn_window_sum", ["x"], _lrn_infer("lrn_window_sum"), _window_sum, attrs=WINDOW_SUM,
       **_GROUP, grad=lambda ins, outs, gs, a: [op.lrn_window_sum(gs[0], **_attrs(a))],
       doc="Sum over the channels ``c - depth .. c + depth`` (zeros beyond the ends) of ``x``: "
           "the window of ``local_response_normalization``; linear and its own adjoint.")
define("local_response_normalization", ["x"], _lrn_infer("local_response_normalization"), _lrn,
       attrs=LRN, grad=_lrn_grad, **_GROUP,
       doc="ND4J's ``localResponseNormalization``: ``x / (bias + alpha * sum of x**2 over "
           "channels c - depth .. c + depth) ** beta``; channels on axis 1 (NCHW) or last.")
